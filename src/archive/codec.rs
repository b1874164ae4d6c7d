//! Compression codecs. zstd runs multithreaded without long mode (readers need no large window)
//! and with frame checksums, so a flipped byte fails decoding even before the manifest check.

use std::io::{self, BufRead, Read, Write};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compression {
    Zstd,
    Gzip,
    None,
}

impl Compression {
    pub fn parse(s: &str) -> Option<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "zstd" => Some(Compression::Zstd),
            "gzip" => Some(Compression::Gzip),
            "none" => Some(Compression::None),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Compression::Zstd => "zstd",
            Compression::Gzip => "gzip",
            Compression::None => "none",
        }
    }

    pub fn encoder<W: Write>(self, w: W) -> io::Result<Encoder<W>> {
        Ok(match self {
            Compression::Zstd => {
                let mut e = zstd::stream::write::Encoder::new(w, 3)?;
                let workers = std::thread::available_parallelism().map(|n| n.get() as u32).unwrap_or(1);
                e.multithread(workers)?;
                e.include_checksum(true)?;
                e.long_distance_matching(false)?;
                Encoder::Zstd(e)
            }
            Compression::Gzip => Encoder::Gzip(flate2::write::GzEncoder::new(w, flate2::Compression::new(6))),
            Compression::None => Encoder::None(w),
        })
    }
}

/// Largest zstd window accepted when decoding (128 MiB): bounds memory for hostile frames.
const MAX_WINDOW_LOG: u32 = 27;

pub fn decoder<'a, R: BufRead + 'a>(compression: Compression, r: R) -> io::Result<Box<dyn Read + 'a>> {
    Ok(match compression {
        Compression::Zstd => {
            let mut d = zstd::stream::read::Decoder::with_buffer(r)?;
            d.window_log_max(MAX_WINDOW_LOG)?;
            Box::new(d)
        }
        Compression::Gzip => Box::new(flate2::bufread::MultiGzDecoder::new(r)),
        Compression::None => Box::new(r),
    })
}

pub enum Encoder<W: Write> {
    Zstd(zstd::stream::write::Encoder<'static, W>),
    Gzip(flate2::write::GzEncoder<W>),
    None(W),
}

impl<W: Write> Encoder<W> {
    /// Flush the compressed stream's end and hand back the writer.
    pub fn finish(self) -> io::Result<W> {
        match self {
            Encoder::Zstd(e) => e.finish(),
            Encoder::Gzip(e) => e.finish(),
            Encoder::None(mut w) => {
                w.flush()?;
                Ok(w)
            }
        }
    }
}

impl<W: Write> Write for Encoder<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Encoder::Zstd(e) => e.write(buf),
            Encoder::Gzip(e) => e.write(buf),
            Encoder::None(w) => w.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Encoder::Zstd(e) => e.flush(),
            Encoder::Gzip(e) => e.flush(),
            Encoder::None(w) => w.flush(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_codec_round_trips() {
        let data: Vec<u8> = (0..200_000u32).flat_map(|i| (i % 251).to_le_bytes()).collect();
        for c in [Compression::Zstd, Compression::Gzip, Compression::None] {
            let mut e = c.encoder(Vec::new()).unwrap();
            e.write_all(&data).unwrap();
            let packed = e.finish().unwrap();
            let mut out = Vec::new();
            decoder(c, &packed[..]).unwrap().read_to_end(&mut out).unwrap();
            assert_eq!(out, data, "{}", c.name());
        }
        assert_eq!(Compression::parse("ZSTD"), Some(Compression::Zstd));
        assert_eq!(Compression::parse("lz4"), None);
    }

    #[test]
    fn a_flipped_byte_fails_zstd_decoding() {
        let data = vec![7u8; 100_000];
        let mut e = Compression::Zstd.encoder(Vec::new()).unwrap();
        e.write_all(&data).unwrap();
        let mut packed = e.finish().unwrap();
        let last = packed.len() - 2;
        packed[last] ^= 0x40;
        let mut out = Vec::new();
        assert!(decoder(Compression::Zstd, &packed[..]).unwrap().read_to_end(&mut out).is_err());
    }
}
