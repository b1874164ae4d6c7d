//! Compression codecs. zstd runs multithreaded without long mode (readers need no large window)
//! and with frame checksums, so a flipped byte fails decoding even before the manifest check.

use std::io::{self, BufRead, Read, Write};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compression {
    Zstd,
    Gzip,
    None,
}

impl crate::choice::Named for Compression {
    const ALL: &'static [Self] = &[Compression::Zstd, Compression::Gzip, Compression::None];

    fn name(self) -> &'static str {
        Compression::name(self)
    }
}

impl Compression {
    pub fn name(self) -> &'static str {
        match self {
            Compression::Zstd => "zstd",
            Compression::Gzip => "gzip",
            Compression::None => "none",
        }
    }

    pub fn encoder<W: Write>(self, w: W) -> io::Result<Encoder<W>> {
        self.encoder_with(w, Effort::Normal)
    }

    /// An encoder; `effort` picks the zstd level (the format is the same either way).
    pub fn encoder_with<W: Write>(self, w: W, effort: Effort) -> io::Result<Encoder<W>> {
        Ok(match self {
            Compression::Zstd => {
                let mut e = zstd::stream::write::Encoder::new(w, effort.zstd_level())?;
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

/// How hard to compress.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Effort {
    /// zstd level 3, what `zstd` and `actions/cache` use.
    Normal,
    /// zstd's fastest negative level: for data that barely compresses (weights, compiled
    /// objects), it costs a seventh of the CPU and gives up a few percent of size.
    Fast,
}

const ZSTD_LEVEL: i32 = 3;
const ZSTD_FAST_LEVEL: i32 = -1;

impl Effort {
    /// Its zstd level.
    pub fn zstd_level(self) -> i32 {
        match self {
            Effort::Normal => ZSTD_LEVEL,
            Effort::Fast => ZSTD_FAST_LEVEL,
        }
    }
}

/// Sampled data that compresses to more than this fraction is treated as incompressible.
pub const INCOMPRESSIBLE: f64 = 0.9;

/// The effort for data like `sample`: compress it at the normal level and look at the ratio.
pub fn effort_for(sample: &[u8]) -> (Effort, f64) {
    if sample.len() < 64 * 1024 {
        return (Effort::Normal, 0.0);
    }
    let ratio = zstd::bulk::compress(sample, ZSTD_LEVEL).map_or(0.0, |c| c.len() as f64 / sample.len() as f64);
    (if ratio > INCOMPRESSIBLE { Effort::Fast } else { Effort::Normal }, ratio)
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
        assert_eq!(crate::choice::parse("ZSTD"), Some(Compression::Zstd));
        assert_eq!(crate::choice::parse::<Compression>("lz4"), None);
    }

    #[test]
    fn incompressible_samples_choose_the_fast_level() {
        let text: Vec<u8> = b"def kernel(x): return x * 2\n".iter().cycle().take(1 << 20).copied().collect();
        assert_eq!(effort_for(&text).0, Effort::Normal);
        let mut x = 0x2545f4914f6cdd1du64;
        let noise: Vec<u8> = (0..1 << 20)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        let (effort, ratio) = effort_for(&noise);
        assert_eq!(effort, Effort::Fast, "ratio {ratio}");
        // Either level gives the same bytes back.
        for effort in [Effort::Normal, Effort::Fast] {
            let mut e = Compression::Zstd.encoder_with(Vec::new(), effort).unwrap();
            e.write_all(&noise).unwrap();
            let packed = e.finish().unwrap();
            let mut out = Vec::new();
            decoder(Compression::Zstd, &packed[..]).unwrap().read_to_end(&mut out).unwrap();
            assert_eq!(out, noise);
        }
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
