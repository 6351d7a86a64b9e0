//! Text from a log (image paths, symbol and event names) made safe to print on one line.

/// `text` on one line: a newline, carriage return or other control character (from an image
/// path a log names, say) is shown escaped (`\n`, `\r`, `\x1b`), so that it cannot start a
/// line of its own that a script would take for pmcstat's.
pub fn one_line(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(|c| c.is_control() && c != '\t') {
        return text.into();
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push('\t'),
            c if c.is_control() => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push(c),
        }
    }
    out.into()
}

#[cfg(test)]
mod tests {
    use super::one_line;

    #[test]
    fn control_characters_are_escaped_onto_one_line() {
        assert_eq!(one_line("plain /usr/bin/sort"), "plain /usr/bin/sort");
        assert_eq!(
            one_line("symbols of /tmp/a\npmcstat: fake\r\x1b[2J unavailable"),
            "symbols of /tmp/a\\npmcstat: fake\\r\\x1b[2J unavailable"
        );
    }
}
