//! Shown: device text (a turbine id, a topic, a metric name, a text value) as a terminal or a log
//! line may show it: control characters escaped, so a device cannot forge a line, clear a
//! screen or ring a bell on an operator's terminal.

use std::borrow::Cow;

/// `s` with every control character (C0, DEL, C1 such as U+0085 NEL) and every line or
/// paragraph separator or bidirectional override written as `\u{…}` (`\n`, `\t`, `\r` as
/// themselves escaped), and a backslash doubled; anything else, letters of any script included,
/// as it is. Borrowed when nothing needs escaping.
pub fn shown(s: &str) -> Cow<'_, str> {
    if !s.chars().any(needs_escape) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if needs_escape(c) => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

fn needs_escape(c: char) -> bool {
    c == '\\'
        || c.is_control()
        || matches!(c, '\u{2028}' | '\u{2029}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_cannot_forge_a_line_or_move_the_cursor() {
        assert_eq!(shown("WTG-0042"), "WTG-0042");
        assert!(matches!(shown("Windpark Süd/Nr-7"), Cow::Borrowed(_)));
        assert_eq!(
            shown("A\n2026-12-03T07:00:00Z ERROR forged"),
            "A\\n2026-12-03T07:00:00Z ERROR forged"
        );
        assert_eq!(shown("\u{1b}[2J\u{7}x\u{85}"), "\\u{1b}[2J\\u{7}x\\u{85}");
        assert_eq!(
            shown("a\\nb"),
            "a\\\\nb",
            "a backslash cannot fake an escape"
        );
        assert_eq!(shown("\u{202e}evil"), "\\u{202e}evil");
        assert_eq!(shown("tab\there"), "tab\\there");
    }
}
