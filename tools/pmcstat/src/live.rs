//! The live flat profile of a sampling run: sampling into a temporary log with no other
//! analysis, or `-T`. Every `-w` seconds it shows the top functions of the log written so far.
//!
//! On a terminal (standard output, without `-o`) it is a full-screen view drawn with ratatui on
//! the alternate screen: a title with the command, the elapsed time and the samples, then one
//! table per event, as many rows as fit. The terminal stays in its normal (cooked) mode, so ^C
//! still ends the measurement cleanly; when the measurement ends the view is left and the final
//! profile is printed as text, where it stays. Otherwise each profile is printed as text, one
//! after the other, separated by a blank line.

use std::io::{IsTerminal, Stdout, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;
use ratatui::layout::{Constraint, Layout};
use ratatui::style::{Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Borders, Paragraph, Row, Table};

use crate::cli::Options;
use crate::failure::{Failure, io_failure};
use crate::report;
use pmcprof::{Profile, flat_rows};

/// Functions in the live profile unless `--top N` says otherwise.
pub const LIVE_ROWS: usize = 20;

/// Whether the alternate screen is in use: a signal that ends pmcstat at once must leave it
/// ([`restore_terminal`]).
static ON_ALTERNATE_SCREEN: AtomicBool = AtomicBool::new(false);

/// Leaves the alternate screen if the live view is on it. Async-signal-safe: one write(2).
pub fn restore_terminal() {
    if ON_ALTERNATE_SCREEN.swap(false, Ordering::SeqCst) {
        const LEAVE: &[u8] = b"\x1b[?1049l\x1b[?25h";
        // SAFETY: write(2) of a static buffer to standard output.
        unsafe { libc::write(1, LEAVE.as_ptr().cast(), LEAVE.len()) };
    }
}

/// How the profile is shown.
enum View {
    /// Text, one profile after the other.
    Text {
        /// Whether a profile was printed (the next one is separated from it).
        printed: bool,
    },
    /// The full-screen view on the terminal.
    Screen(Box<Terminal<CrosstermBackend<Stdout>>>),
}

/// The live flat profile (see the module documentation).
pub struct LiveProfile {
    /// The log, read back.
    log: PathBuf,
    /// Functions shown (per event on the screen: as many as fit).
    rows: usize,
    view: View,
    /// The title: the command, or what is measured.
    what: String,
    started: Instant,
}

impl LiveProfile {
    /// The live profile of this run, reading the log at `log`, if it shows one: `shown` says
    /// whether it does (sampling into a temporary log with no analysis but `--top`, or `-T`).
    pub fn new(o: &Options, log: PathBuf) -> LiveProfile {
        let what = if o.command.is_empty() {
            "pmcstat".to_owned()
        } else {
            o.command.iter().map(|a| a.to_string_lossy()).collect::<Vec<_>>().join(" ")
        };
        let on_terminal = o.output.is_none() && std::io::stdout().is_terminal();
        let view = match on_terminal.then(enter_screen).flatten() {
            Some(terminal) => View::Screen(Box::new(terminal)),
            None => View::Text { printed: false },
        };
        LiveProfile { log, rows: o.top.unwrap_or(LIVE_ROWS), view, what, started: Instant::now() }
    }

    /// Whether the view is the full screen.
    pub fn on_screen(&self) -> bool {
        matches!(self.view, View::Screen(_))
    }

    /// Shows the profile of the log written so far (nothing before the first sample). Errors
    /// reading a log that is still being written are left for the final profile to report.
    pub fn show_current(&mut self, o: &Options, out: &mut dyn Write) -> Result<(), Failure> {
        let _ = pmc::api::flush_log();
        // Read through a bounded window; a log still being written may end inside a record:
        // the profile is that of the whole records before it.
        let Ok(file) = std::fs::File::open(&self.log) else { return Ok(()) };
        let Ok(read) = report::read_log(o, file, "the log") else { return Ok(()) };
        let profile = read.profile;
        let elapsed = self.started.elapsed().as_secs_f64();
        match &mut self.view {
            View::Screen(terminal) => {
                let title = format!("{} — {elapsed:.1} s", self.what);
                terminal
                    .draw(|frame| draw(frame, &profile, &title))
                    .map_err(|e| io_failure("drawing the profile", &e))?;
                Ok(())
            }
            View::Text { printed } => {
                let separated = *printed;
                *printed |= print_text(&profile, self.rows, separated, out)?;
                Ok(())
            }
        }
    }

    /// Shows the final profile: the full-screen view is left and the profile printed as text.
    pub fn show_final(&mut self, profile: &Profile, out: &mut dyn Write) -> Result<(), Failure> {
        let separated = match &self.view {
            View::Screen(_) => false,
            View::Text { printed } => *printed,
        };
        self.leave_screen();
        print_text(profile, self.rows, separated, out)?;
        Ok(())
    }

    fn leave_screen(&mut self) {
        if let View::Screen(terminal) = &mut self.view {
            let _ = terminal.show_cursor();
            let _ = ratatui::crossterm::execute!(
                terminal.backend_mut(),
                ratatui::crossterm::terminal::LeaveAlternateScreen
            );
            ON_ALTERNATE_SCREEN.store(false, Ordering::SeqCst);
            self.view = View::Text { printed: false };
        }
    }
}

impl Drop for LiveProfile {
    fn drop(&mut self) {
        self.leave_screen();
    }
}

/// The terminal on the alternate screen, or `None` if it cannot be used.
fn enter_screen() -> Option<Terminal<CrosstermBackend<Stdout>>> {
    let mut stdout = std::io::stdout();
    ratatui::crossterm::execute!(stdout, ratatui::crossterm::terminal::EnterAlternateScreen)
        .ok()?;
    ON_ALTERNATE_SCREEN.store(true, Ordering::SeqCst);
    match Terminal::new(CrosstermBackend::new(stdout)) {
        Ok(mut terminal) => {
            let _ = terminal.hide_cursor();
            let _ = terminal.clear();
            Some(terminal)
        }
        Err(_) => {
            restore_terminal();
            None
        }
    }
}

/// Prints the flat profile as text (after a blank line when `separated`); whether anything was
/// printed (nothing before the first sample).
fn print_text(
    profile: &Profile,
    rows: usize,
    separated: bool,
    out: &mut dyn Write,
) -> Result<bool, Failure> {
    let mut text = Vec::new();
    pmcprof::write_top(profile, rows, &mut text)
        .map_err(|e| io_failure("writing the profile", &e))?;
    if text.is_empty() {
        return Ok(false);
    }
    let before: &[u8] = if separated { b"\n" } else { b"" };
    out.write_all(before)
        .and_then(|()| out.write_all(&text))
        .and_then(|()| out.flush())
        .map_err(|e| io_failure("writing the profile", &e))?;
    Ok(true)
}

/// Draws the view: the title line, then one table per event sharing the height, then a hint.
fn draw(frame: &mut ratatui::Frame<'_>, profile: &Profile, title: &str) {
    let events: Vec<(String, u64)> =
        profile.sample_counts().into_iter().filter(|(_, n)| *n > 0).collect();
    let total: u64 = events.iter().map(|(_, n)| n).sum();
    let area = frame.area();
    let [head, body, foot] =
        Layout::vertical([Constraint::Length(1), Constraint::Min(0), Constraint::Length(1)])
            .areas(area);
    let heading = format!("{title} — {total} samples");
    frame.render_widget(
        Paragraph::new(Line::from(heading)).style(Style::new().add_modifier(Modifier::BOLD)),
        head,
    );
    frame.render_widget(
        Paragraph::new("^C ends the measurement; the final profile stays on the terminal"),
        foot,
    );
    if events.is_empty() {
        frame.render_widget(Paragraph::new("waiting for the first sample…"), body);
        return;
    }
    let parts =
        Layout::vertical(vec![Constraint::Ratio(1, events.len() as u32); events.len()]).split(body);
    for ((name, samples), part) in events.iter().zip(parts.iter()) {
        // Borders and the header row take three lines.
        let fit = usize::from(part.height.saturating_sub(3));
        let rows = flat_rows(profile, name, fit);
        let pct = |n: u64| format!("{:.2}", 100.0 * n as f64 / *samples as f64);
        let table_rows = rows.iter().map(|row| {
            let frame = profile.frame(row.frame);
            Row::new(vec![
                pct(row.self_samples),
                row.self_samples.to_string(),
                pct(row.total_samples),
                row.total_samples.to_string(),
                frame.name(),
                frame.image_basename().to_owned(),
            ])
        });
        let widths = [
            Constraint::Length(7),
            Constraint::Length(8),
            Constraint::Length(7),
            Constraint::Length(8),
            Constraint::Fill(3),
            Constraint::Fill(1),
        ];
        let header = Row::new(["self%", "self", "total%", "total", "function", "image"])
            .style(Style::new().add_modifier(Modifier::BOLD));
        let table = Table::new(table_rows, widths).header(header).block(
            Block::new().borders(Borders::ALL).title(format!(" {name} [{samples} samples] ")),
        );
        frame.render_widget(table, *part);
    }
}

#[cfg(test)]
mod tests {
    use ratatui::backend::TestBackend;

    use super::*;
    use pmcprof::ResolveOptions;
    use pmcprof_fixtures::{CPU_CLK_UNHALTED_CORE, Program, hot_warm_main};

    /// The screen's lines as text.
    fn screen(profile: &Profile, width: u16, height: u16) -> Vec<String> {
        let mut terminal = Terminal::new(TestBackend::new(width, height)).unwrap();
        terminal.draw(|frame| draw(frame, profile, "prog — 1.0 s")).unwrap();
        let buffer = terminal.backend().buffer();
        (0..height)
            .map(|y| (0..width).map(|x| buffer[(x, y)].symbol()).collect::<String>())
            .collect()
    }

    #[test]
    fn the_view_has_a_title_and_a_table_per_event_with_the_rows_that_fit() {
        let p = Program::build(false);
        let mut log = hot_warm_main(&p);
        log.allocate(0x200, CPU_CLK_UNHALTED_CORE);
        log.samples(100, 0x200, &[p.at("cold", 1), p.at("main", 3)], 4);
        let profile = Profile::from_log(&log.bytes(), &ResolveOptions::default()).unwrap();
        let lines = screen(&profile, 80, 20);
        assert!(lines[0].starts_with("prog — 1.0 s — 14 samples"), "{lines:#?}");
        assert!(lines[19].starts_with("^C ends the measurement"), "{lines:#?}");
        let text = lines.join("\n");
        assert!(text.contains(" INSTR_RETIRED_ANY [10 samples] "), "{text}");
        assert!(text.contains(" CPU_CLK_UNHALTED_CORE [4 samples] "), "{text}");
        let row = |name: &str| lines.iter().find(|l| l.contains(&format!(" {name} "))).cloned();
        let hot = row("hot").unwrap();
        let fields: Vec<&str> =
            hot.trim_matches(|c| c == '│' || c == ' ').split_whitespace().collect();
        assert_eq!(fields, ["70.00", "7", "70.00", "7", "hot", "prog"], "{hot}");
        // Nine lines per table: borders and header take three, six rows would fit.
        assert!(row("cold").is_some() && row("main").is_some());
        // A screen too small for rows still draws the titles.
        let tiny = screen(&profile, 40, 6);
        assert!(tiny[0].starts_with("prog"), "{tiny:#?}");
    }

    #[test]
    fn before_the_first_sample_the_view_says_it_waits() {
        let profile = Profile::from_log(&[], &ResolveOptions::default()).unwrap();
        let lines = screen(&profile, 60, 5);
        assert!(lines[0].starts_with("prog — 1.0 s — 0 samples"), "{lines:#?}");
        assert!(lines[1].starts_with("waiting for the first sample"), "{lines:#?}");
    }
}
