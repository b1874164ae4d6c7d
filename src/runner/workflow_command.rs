//! Escaping for workflow commands (`::warning file=…::message`), as the runner decodes them.

/// Escape a command's message: `%`, CR and LF.
pub fn escape_data(s: &str) -> String {
    s.replace('%', "%25").replace('\r', "%0D").replace('\n', "%0A")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_like_the_runner_expects() {
        assert_eq!(escape_data("50% a\r\nb"), "50%25 a%0D%0Ab");
    }
}
