//! The forms a secret takes in transit, so that a redaction finds it there too.
//!
//! URL and JSON escaping are not lists of forms: encoders differ in which characters they leave
//! raw and in the case of their hex digits, and one text may mix them. So [`redact_url_encoded`]
//! reads the text through a decoding view and redacts the original span wherever that view reads
//! as the secret. The fixed forms [`forms`] lists are the rest: plain JSON escaping, and base64
//! (both alphabets) at each of the three alignments it can have inside a longer encoded text.

use base64::Engine as _;
use base64::engine::GeneralPurpose;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};

/// Encoded forms shorter than this are not redacted: they would match ordinary text.
const MIN_FORM_LEN: usize = 8;

/// The fixed forms of `secret` other than itself and its URL encodings (no duplicates, none
/// equal to `secret`): JSON-escaped and base64.
pub(super) fn forms(secret: &str) -> Vec<String> {
    let mut forms: Vec<String> = Vec::new();
    let mut add = |form: String| {
        if form.len() >= MIN_FORM_LEN && form != secret && !forms.contains(&form) {
            forms.push(form);
        }
    };
    if let Ok(json) = serde_json::to_string(secret) {
        add(json[1..json.len() - 1].to_owned());
    }
    add(STANDARD.encode(secret));
    for engine in [&STANDARD, &URL_SAFE_NO_PAD] {
        for offset in 0..3 {
            add(aligned_base64(engine, secret.as_bytes(), offset));
        }
    }
    forms
}

/// `text` with every span that reads as `secret` through the decoding view replaced by `***`
/// (leftmost first, each as long as it can be); `None` where there is none. The view reads a
/// `%XX` escape as its byte, a JSON escape as its character, a `+` as a space and a space as a
/// `+` (a form decoder's doing), any other byte as itself. A span that is not `secret` itself is
/// redacted only from [`MIN_FORM_LEN`] characters on. Ordinary text costs one pass.
pub(super) fn redact_url_encoded(text: &str, secret: &str) -> Option<String> {
    let (t, s) = (text.as_bytes(), secret.as_bytes());
    if s.is_empty() {
        return None;
    }
    let mut out: Option<String> = None;
    let (mut copied, mut i) = (0, 0);
    let mut reach: Vec<Vec<usize>> = vec![Vec::new(); s.len() + 1];
    while i < t.len() {
        if could_start(t[i], s[0]) && text.is_char_boundary(i) {
            let end = longest_match(t, i, secret, &mut reach).filter(|&end| text.is_char_boundary(end));
            if let Some(end) = end {
                let out = out.get_or_insert_with(|| String::with_capacity(text.len()));
                out.push_str(&text[copied..i]);
                out.push_str("***");
                (copied, i) = (end, end);
                continue;
            }
        }
        i += 1;
    }
    let mut out = out?;
    out.push_str(&text[copied..]);
    Some(out)
}

/// The end of the longest span from `start` that decodes to `secret` and may be redacted.
/// `reach[k]` holds the text positions after a reading of `secret[..k]`; every way to read a
/// span is tracked together, so no text is read twice for one secret position.
fn longest_match(t: &[u8], start: usize, secret: &str, reach: &mut [Vec<usize>]) -> Option<usize> {
    let s = secret.as_bytes();
    for r in reach.iter_mut() {
        r.clear();
    }
    reach[0].push(start);
    for k in 0..s.len() {
        if reach[k].is_empty() {
            continue;
        }
        let here = std::mem::take(&mut reach[k]);
        for &p in &here {
            for (text_len, secret_len) in steps(t, p, secret, k) {
                let to = &mut reach[k + secret_len];
                if !to.contains(&(p + text_len)) {
                    to.push(p + text_len);
                }
            }
        }
        reach[k] = here;
    }
    reach[s.len()].iter().copied().filter(|&end| &t[start..end] == s || end - start >= MIN_FORM_LEN).max()
}

/// Whether a text byte `c` may begin a reading of the secret byte `b` (itself, its `+`/space
/// twin, or the start of an escape).
fn could_start(c: u8, b: u8) -> bool {
    c == b || c == b'%' || c == b'\\' || (c == b'+' && b == b' ') || (c == b' ' && b == b'+')
}

/// The ways the text at `p` reads as the secret from byte `k` on: (text bytes, secret bytes).
fn steps(t: &[u8], p: usize, secret: &str, k: usize) -> impl Iterator<Item = (usize, usize)> {
    let b = secret.as_bytes()[k];
    let raw = t.get(p).is_some_and(|&c| c == b || (c == b'+' && b == b' ') || (c == b' ' && b == b'+'));
    let unicode = secret
        .is_char_boundary(k)
        .then(|| secret[k..].chars().next())
        .flatten()
        .and_then(|c| json_unicode_escape(t, p, c).map(|n| (n, c.len_utf8())));
    [raw.then_some((1, 1)), escape_for(t, p, b).map(|n| (n, 1)), json_short_escape(t, p, b).map(|n| (n, 1)), unicode]
        .into_iter()
        .flatten()
}

/// 3 where a `%XX` escape of `b` (hex digits in either case) starts at `p`.
fn escape_for(t: &[u8], p: usize, b: u8) -> Option<usize> {
    let (&[b'%', hi, lo], _) = t.get(p..)?.split_first_chunk::<3>()? else {
        return None;
    };
    let hex = |c: u8| (c as char).to_digit(16);
    (hex(hi)? * 16 + hex(lo)? == u32::from(b)).then_some(3)
}

/// 2 where a two-character JSON escape of `b` starts at `p`.
fn json_short_escape(t: &[u8], p: usize, b: u8) -> Option<usize> {
    let (&[b'\\', e], _) = t.get(p..)?.split_first_chunk::<2>()? else {
        return None;
    };
    let means = match e {
        b'/' | b'"' | b'\\' => e,
        b'b' => 0x08,
        b'f' => 0x0c,
        b'n' => b'\n',
        b'r' => b'\r',
        b't' => b'\t',
        _ => return None,
    };
    (means == b).then_some(2)
}

/// The length of a JSON `\uXXXX` escape of `c` at `p` (hex digits in either case; a surrogate
/// pair, 12 bytes, for a character beyond the BMP).
fn json_unicode_escape(t: &[u8], p: usize, c: char) -> Option<usize> {
    let unit = |at: usize| -> Option<u32> {
        let (&[b'\\', b'u', a, b, c, d], _) = t.get(at..)?.split_first_chunk::<6>()? else {
            return None;
        };
        let hex = |c: u8| (c as char).to_digit(16);
        Some((hex(a)? << 12) | (hex(b)? << 8) | (hex(c)? << 4) | hex(d)?)
    };
    let mut units = [0u16; 2];
    match c.encode_utf16(&mut units) {
        [one] => (unit(p)? == u32::from(*one)).then_some(6),
        [high, low] => (unit(p)? == u32::from(*high) && unit(p + 6)? == u32::from(*low)).then_some(12),
        _ => None,
    }
}

/// The characters of `secret`'s base64 that its bytes alone decide when it starts `offset`
/// bytes (0–2) past a 3-byte boundary of the encoded text: character `i` covers bits
/// `6i..6i+6`, and only those wholly inside the secret's bits are kept.
fn aligned_base64(engine: &GeneralPurpose, secret: &[u8], offset: usize) -> String {
    let mut padded = vec![0u8; offset];
    padded.extend_from_slice(secret);
    let encoded = engine.encode(&padded);
    let (start_bit, end_bit) = (8 * offset, 8 * (offset + secret.len()));
    encoded
        .chars()
        .enumerate()
        .filter(|(i, c)| *c != '=' && 6 * i >= start_bit && 6 * i + 6 <= end_bit)
        .map(|(_, c)| c)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `text` redacted of `secret` through the percent-decoding view (unchanged if none).
    fn url(text: &str, secret: &str) -> String {
        redact_url_encoded(text, secret).unwrap_or_else(|| text.to_owned())
    }

    #[test]
    fn encoded_forms_are_found_wherever_the_secret_sits() {
        let secret = "FwoGZXIvYXdz+Session/Token== \"x\"~";
        let forms = forms(secret);
        assert!(!forms.iter().any(|f| f == secret), "{forms:?}");
        assert!(forms.contains(&"FwoGZXIvYXdz+Session/Token== \\\"x\\\"~".to_owned()), "{forms:?}");
        for encoded in [
            secret,
            "FwoGZXIvYXdz%2BSession%2FToken%3D%3D%20%22x%22~",
            "FwoGZXIvYXdz%2bSession%2fToken%3d%3d%20%22x%22~",
            "FwoGZXIvYXdz%2BSession%2FToken%3D%3D+%22x%22%7E",
        ] {
            assert_eq!(url(&format!("a {encoded} b"), secret), "a *** b", "{encoded}");
        }
        // Inside any longer base64 text, at any alignment, in either alphabet.
        for before in ["", "a", "ab", "user:", "Basic credentials "] {
            let whole = format!("{before}{secret} and more");
            for encoded in [STANDARD.encode(&whole), URL_SAFE_NO_PAD.encode(&whole)] {
                let found = forms.iter().filter(|f| encoded.contains(f.as_str())).map(|f| f.len()).max();
                assert!(found.is_some_and(|len| len >= secret.len() * 4 / 3 - 3), "{before:?}: {encoded}");
            }
        }
        let short = super::forms("abcd");
        assert!(short.iter().all(|f| f.len() >= MIN_FORM_LEN), "{short:?}");
    }

    #[test]
    fn hex_digits_of_both_cases_in_one_text_are_decoded() {
        let secret = "Tok3n+Sess/ion=Val";
        assert_eq!(url("Tok3n%2BSess%2fion%3DVal.log", secret), "***.log");
        assert_eq!(url("x=Tok3n%2bSess%2Fion%3dVal&y", secret), "x=***&y");
        // An unreserved character escaped all the same is still the secret.
        assert_eq!(url("%54ok3n%2BSess%2Fion%3DV%61l", secret), "***");
    }

    #[test]
    fn partial_encodings_that_leave_reserved_characters_raw_are_found() {
        // Path-style escaping keeps `+` and `=` but encodes `/`.
        let secret = "Tok3n+Sess/ion=Val";
        assert_eq!(url("out/Tok3n+Sess%2Fion=Val.log", secret), "out/***.log");
        assert_eq!(url("Tok3n%2BSess/ion=Val", secret), "***");
        // `encodeURIComponent` keeps `!'()*` raw and encodes the rest.
        let secret = "it's (a) secret*! /x";
        assert_eq!(url("q=it's%20(a)%20secret*!%20%2Fx&r=1", secret), "q=***&r=1");
        assert_eq!(url("q=it%27s%20%28a%29%20secret%2A%21%20%2Fx", secret), "q=***");
    }

    #[test]
    fn a_plus_stands_for_a_space_as_in_form_encoding() {
        let secret = "pass phrase with spaces";
        assert_eq!(url("body=pass+phrase+with+spaces&next", secret), "body=***&next");
        assert_eq!(url("body=pass+phrase%20with+spaces", secret), "body=***");
        // A `+` of the secret is read raw, as `%2B`, or as the space a form decoder made of it.
        assert_eq!(url("a b", "a+b+cdef"), "a b");
        assert_eq!(url("a%2Bb+cdef and a+b%2bcdef", "a+b+cdef"), "*** and ***");
        assert_eq!(url("sig=a b cdef&x", "a+b+cdef"), "sig=***&x");
        assert_eq!(url("sig=Tok3n Sess/ion=Val", "Tok3n+Sess/ion=Val"), "sig=***");
    }

    #[test]
    fn a_percent_of_the_secret_is_read_raw_or_escaped() {
        let secret = "50%25off%";
        assert_eq!(url("50%25off%", secret), "***");
        assert_eq!(url("50%2525off%25", secret), "***");
        assert_eq!(url("50%25%32%35off%", secret), "***");
    }

    #[test]
    fn ordinary_text_is_untouched() {
        let secret = "Tok3n+Sess/ion=Val";
        for text in [
            "",
            "Tok3n",
            "Tok3n+Sess/ion=Va",
            "Tok3n%2BSess%2Fion%3DVa1",
            "Tok3n%2BSess%2Fion%3",
            "%%%2%2B%G0 100% done, 50%% more",
            "restored 12 files from exact-cache-0123abcd (4.2 MiB)",
            "日本語のテキスト Tok3n+Séss/ion=Val",
        ] {
            assert_eq!(redact_url_encoded(text, secret), None, "{text}");
        }
        // An escaped form shorter than the least encoded length is left, the secret itself not.
        assert_eq!(url("ab%2Fc and ab/c", "ab/c"), "ab%2Fc and ***");
        assert_eq!(url("abc%2Fd", "abc/d"), "abc%2Fd");
        assert_eq!(url("abcd%2Fe", "abcd/e"), "***");
    }

    #[test]
    fn a_secret_of_other_scripts_matches_raw_and_escaped() {
        let secret = "clé-secrète";
        assert_eq!(url("k=cl%C3%A9-secr%c3%A8te!", secret), "k=***!");
        assert_eq!(url("k=clé-secrète", secret), "k=***");
        // A raw lead byte never pairs with an escaped continuation in valid text.
        assert_eq!(url("clé-secr%C3te", secret), "clé-secr%C3te");
    }

    /// A small deterministic generator (xorshift), so the property test needs no crate.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }

        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
    }

    /// Every form a secret may take in a log, as (name, text).
    fn every_form(secret: &str) -> Vec<(&'static str, String)> {
        let percent = |upper: bool, keep: &str| -> String {
            secret
                .bytes()
                .map(|b| match b.is_ascii_alphanumeric() || keep.as_bytes().contains(&b) {
                    true => (b as char).to_string(),
                    false if upper => format!("%{b:02X}"),
                    false => format!("%{b:02x}"),
                })
                .collect()
        };
        let json_u = |upper: bool| -> String {
            secret
                .chars()
                .map(|c| match c {
                    '+' | '/' | '=' if upper => format!("\\u{:04X}", c as u32),
                    '+' | '/' | '=' => format!("\\u{:04x}", c as u32),
                    '"' => "\\\"".to_owned(),
                    '\\' => "\\\\".to_owned(),
                    c => c.to_string(),
                })
                .collect()
        };
        let every_char_u: String = secret.chars().map(|c| format!("\\u{:04x}", c as u32)).collect();
        vec![
            ("raw", secret.to_owned()),
            ("percent, upper", percent(true, "-_.~")),
            ("percent, lower", percent(false, "-_.~")),
            ("path-style", percent(true, "-_.~+=")),
            ("percent of `/` only", secret.replace('/', "%2F")),
            ("JSON `\\/`", serde_json::to_string(secret).unwrap().trim_matches('"').replace('/', "\\/")),
            ("JSON `\\u002B`", json_u(true)),
            ("JSON `\\u002b`", json_u(false)),
            ("JSON, every character", every_char_u),
            ("`+` read as a space", secret.replace('+', " ")),
            ("`+` as a space, `/` as `\\/`", secret.replace('+', " ").replace('/', "\\/")),
        ]
    }

    /// Secrets made of base64 characters are found in every form, wherever they are cut into a
    /// text, and in base64 at every alignment.
    #[test]
    fn every_form_of_a_secret_is_redacted_at_every_cut() {
        const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=";
        let mut rng = Rng(0x5eed_1234_abcd_ef01);
        let line = "GET /c?restype=container&sig=<> HTTP/1.1 {\"echo\":\"<>\"}";
        for round in 0..300 {
            let len = 8 + rng.below(40);
            let mut secret: String = (0..len).map(|_| ALPHABET[rng.below(ALPHABET.len())] as char).collect();
            // Each secret holds every character that escapes differently.
            for c in ['+', '/', '='] {
                let at = rng.below(secret.len());
                secret.replace_range(at..=at, &c.to_string());
            }
            let redactor = super::super::Redactor::default();
            redactor.insert(&secret);
            for (name, form) in every_form(&secret) {
                for cut in 0..=line.len() {
                    if !line.is_char_boundary(cut) {
                        continue;
                    }
                    let text = format!("{}{form}{}", &line[..cut], &line[cut..]);
                    let out = redactor.redact(&text);
                    assert!(
                        !out.contains(&form) && !out.contains(&secret) && out.contains("***"),
                        "round {round}, `{secret}` {name} cut in at {cut}: {text} -> {out}"
                    );
                }
            }
            for before in ["", "a", "ab"] {
                for engine in [&STANDARD, &URL_SAFE_NO_PAD] {
                    let encoded = engine.encode(format!("{before}{secret} and more"));
                    let out = redactor.redact(&format!("Authorization: Basic {encoded}"));
                    let aligned = aligned_base64(engine, secret.as_bytes(), before.len() % 3);
                    assert!(!out.contains(&aligned), "round {round}, base64 of `{secret}` after {before:?}: {out}");
                }
            }
        }
    }
}
