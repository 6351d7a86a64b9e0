//! `pmcstat --json` of a counting run: one JSON document on standard output (or `-o`), for
//! scripts.
//!
//! ```json
//! {"pmcs":[{"event":"instructions","mode":"process","cpu":null,"value":10000000}],
//!  "exit_status":0,"log_error":null}
//! ```
//!
//! A multiplexed PMC also has `raw_value`, `time_enabled` and `time_running`. Keys come in the
//! order above (the fields' order), written compactly by serde_json.

use std::io::{self, Write};

use serde::Serialize;

/// The whole document.
#[derive(Debug, Serialize)]
pub struct CountsDocument<'a> {
    /// One entry per PMC, in the order of the command line.
    pub pmcs: Vec<PmcCount<'a>>,
    /// The measured command's exit status; `null` without a command of pmcstat's own.
    pub exit_status: Option<i32>,
    /// Why the log (`-O`) could not be finished, if it could not.
    pub log_error: Option<&'a str>,
}

/// One PMC's count.
#[derive(Debug, Serialize)]
pub struct PmcCount<'a> {
    /// The event spec, as given.
    pub event: &'a str,
    /// `"process"` or `"system"`.
    pub mode: &'static str,
    /// The CPU of a system PMC; `null` for a process PMC.
    pub cpu: Option<u32>,
    /// The count, scaled when the PMC was multiplexed.
    pub value: u64,
    /// What a multiplexed PMC's count was scaled from; absent otherwise.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub multiplexed: Option<Multiplexed>,
}

/// The count as read and the times it was scaled with (the driver's reference cycles; perf's
/// nanoseconds on Linux).
#[derive(Debug, Serialize)]
pub struct Multiplexed {
    /// The count as read.
    pub raw_value: u64,
    /// Time the PMC was enabled.
    pub time_enabled: u64,
    /// Time it was on a counter.
    pub time_running: u64,
}

/// Writes `document` and a newline.
pub fn write(document: &CountsDocument<'_>, out: &mut dyn Write) -> io::Result<()> {
    let mut serializer = serde_json::Serializer::with_formatter(&mut *out, UnicodeEscapes);
    document.serialize(&mut serializer).map_err(io::Error::from)?;
    out.write_all(b"\n")
}

/// serde_json's compact layout, with every control character escaped as `\u00XX` (a newline in
/// a log path is `\u000a`, not `\n`), as pmcstat has always written it.
struct UnicodeEscapes;

impl serde_json::ser::Formatter for UnicodeEscapes {
    fn write_char_escape<W: ?Sized + Write>(
        &mut self,
        writer: &mut W,
        escape: serde_json::ser::CharEscape,
    ) -> io::Result<()> {
        use serde_json::ser::CharEscape;
        let byte = match escape {
            CharEscape::Quote => return writer.write_all(b"\\\""),
            CharEscape::ReverseSolidus => return writer.write_all(b"\\\\"),
            CharEscape::Solidus => return writer.write_all(b"\\/"),
            CharEscape::Backspace => 0x08,
            CharEscape::FormFeed => 0x0c,
            CharEscape::LineFeed => b'\n',
            CharEscape::CarriageReturn => b'\r',
            CharEscape::Tab => b'\t',
            CharEscape::AsciiControl(byte) => byte,
        };
        write!(writer, "\\u{byte:04x}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(document: &CountsDocument<'_>) -> String {
        let mut out = Vec::new();
        write(document, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn keys_come_in_field_order_and_times_only_for_a_multiplexed_pmc() {
        let document = CountsDocument {
            pmcs: vec![
                PmcCount {
                    event: "instructions",
                    mode: "process",
                    cpu: None,
                    value: 10,
                    multiplexed: None,
                },
                PmcCount {
                    event: "branches",
                    mode: "system",
                    cpu: Some(1),
                    value: 20,
                    multiplexed: Some(Multiplexed {
                        raw_value: 5,
                        time_enabled: 4,
                        time_running: 1,
                    }),
                },
            ],
            exit_status: Some(0),
            log_error: None,
        };
        assert_eq!(
            text(&document),
            "{\"pmcs\":[{\"event\":\"instructions\",\"mode\":\"process\",\"cpu\":null,\"value\":10},\
             {\"event\":\"branches\",\"mode\":\"system\",\"cpu\":1,\"value\":20,\"raw_value\":5,\
             \"time_enabled\":4,\"time_running\":1}],\"exit_status\":0,\"log_error\":null}\n"
        );
    }

    #[test]
    fn control_characters_are_unicode_escapes() {
        let document = CountsDocument {
            pmcs: Vec::new(),
            exit_status: None,
            log_error: Some("a \"b\"\\c\nd\te\u{1b}/"),
        };
        assert_eq!(
            text(&document),
            "{\"pmcs\":[],\"exit_status\":null,\"log_error\":\"a \\\"b\\\"\\\\c\\u000ad\\u0009e\\u001b/\"}\n"
        );
    }
}
