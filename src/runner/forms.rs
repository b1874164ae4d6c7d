//! The forms a secret takes in transit, so that a redaction finds it there too: URL-encoded
//! (strict `%XX`, in either case of hex digit, and form encoding with `+` for a space), escaped
//! inside a JSON string, and base64 (standard and URL-safe alphabets) at each of the three
//! alignments it can have inside a longer encoded text — there only the characters that the
//! secret's bytes alone decide, so a match does not depend on what surrounds it.

use base64::Engine as _;
use base64::engine::GeneralPurpose;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};

/// Encoded forms shorter than this are not redacted: they would match ordinary text.
const MIN_FORM_LEN: usize = 8;

/// `secret` itself, then every other form of it worth redacting (no duplicates).
pub(super) fn forms(secret: &str) -> Vec<String> {
    let mut forms = vec![secret.to_owned()];
    let mut add = |form: String| {
        if form.len() >= MIN_FORM_LEN && !forms.contains(&form) {
            forms.push(form);
        }
    };
    let strict = percent_encode(secret);
    add(lower_hex(&strict));
    add(strict);
    add(url::form_urlencoded::byte_serialize(secret.as_bytes()).collect());
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

/// Every byte but the unreserved ones (`A-Z a-z 0-9 - . _ ~`) as `%XX` (upper-case hex).
fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len() * 3);
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// `%XX` escapes with lower-case hex digits (the rest untouched).
fn lower_hex(encoded: &str) -> String {
    let mut out = String::with_capacity(encoded.len());
    let mut rest = encoded;
    while let Some(i) = rest.find('%') {
        out.push_str(&rest[..i]);
        let end = (i + 3).min(rest.len());
        out.push_str(&rest[i..end].to_ascii_lowercase());
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
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

    #[test]
    fn encoded_forms_are_found_wherever_the_secret_sits() {
        let secret = "FwoGZXIvYXdz+Session/Token== \"x\"~";
        let forms = forms(secret);
        assert_eq!(forms[0], secret);
        for form in [
            "FwoGZXIvYXdz%2BSession%2FToken%3D%3D%20%22x%22~",
            "FwoGZXIvYXdz%2bSession%2fToken%3d%3d%20%22x%22~",
            "FwoGZXIvYXdz%2BSession%2FToken%3D%3D+%22x%22%7E",
            "FwoGZXIvYXdz+Session/Token== \\\"x\\\"~",
        ] {
            assert!(forms.contains(&form.to_owned()), "{form} not in {forms:?}");
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
        assert!(short[0] == "abcd" && short[1..].iter().all(|f| f.len() >= MIN_FORM_LEN), "{short:?}");
    }
}
