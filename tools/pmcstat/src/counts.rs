//! Counting-mode output in FreeBSD pmcstat's layout: a header line `# p/NAME s/CC/NAME`, then a
//! line of values per interval and at the end, each column as wide as its title or as the number
//! of decimal digits of the counter's width, whichever is more.
//!
//! For people (a terminal, or `--summary`), the lines can start with a time column: the seconds
//! since the measurement started (`#     seconds p/NAME …`, `       1.000 …`), as `perf stat
//! -I` prints them. Scripts that read FreeBSD's layout never get it.

use std::io::{self, Write};

/// One counting column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Column {
    /// The event spec (pmcstat's PMC name).
    pub name: String,
    /// `Some(cpu)` for a system PMC.
    pub cpu: Option<u32>,
    /// The counter's width in bits.
    pub width_bits: u32,
    /// Whether values are cumulative (`-C`) rather than deltas.
    pub cumulative: bool,
    /// The value printed last (for deltas).
    pub saved: u64,
    /// The column's width and the spaces before its title (`ev_fieldwidth`, `ev_fieldskip`).
    field_width: usize,
    field_skip: usize,
}

impl Column {
    /// A column for a PMC named `name` (on `cpu` for a system PMC) with a `width_bits` counter.
    pub fn new(name: &str, cpu: Option<u32>, width_bits: u32, cumulative: bool) -> Column {
        // FreeBSD: header width = strlen(name) + 2 ("p/"), + 3 for "CC/" of system PMCs;
        // display width = floor(bits / log2(10)) + 1.
        let header = name.len() + 2 + if cpu.is_some() { 3 } else { 0 };
        // FreeBSD's own constant, not LOG2_10, so the widths are the same digit for digit.
        #[allow(clippy::approx_constant)]
        let display = (f64::from(width_bits) / 3.32193).floor() as usize + 1;
        let (field_width, field_skip) =
            if header > display { (header, 0) } else { (display, display - header) };
        Column {
            name: name.to_string(),
            cpu,
            width_bits,
            cumulative,
            saved: 0,
            field_width,
            field_skip,
        }
    }
}

/// The width of the time column, `# ` included.
const TIME_WIDTH: usize = 14;

/// The header line, without its newline: `# `, the time column's title when `timed`, then each
/// column's title.
pub fn write_header(columns: &[Column], timed: bool, out: &mut dyn Write) -> io::Result<()> {
    write!(out, "# ")?;
    if timed {
        write!(out, "{:>1$} ", "seconds", TIME_WIDTH - 2)?;
    }
    for c in columns {
        write!(out, "{:1$}", "", c.field_skip)?;
        let w = c.field_width - c.field_skip - 2;
        match c.cpu {
            Some(cpu) => write!(out, "s/{cpu:02}/{:<1$} ", c.name, w.saturating_sub(3))?,
            None => write!(out, "p/{:>1$} ", c.name, w)?,
        }
    }
    Ok(())
}

/// One line of values (preceded by its newline): deltas since the last line, or cumulative
/// values for `-C` columns; first the seconds since the start when `elapsed` is given (the
/// header was written `timed`).
pub fn write_values(
    columns: &mut [Column],
    values: &[u64],
    elapsed: Option<std::time::Duration>,
    out: &mut dyn Write,
) -> io::Result<()> {
    writeln!(out)?;
    let mut extra = 2; // the "# " of the header
    if let Some(elapsed) = elapsed {
        write!(out, "{:>1$.3} ", elapsed.as_secs_f64(), TIME_WIDTH)?;
        extra = 0;
    }
    for (c, &value) in columns.iter_mut().zip(values) {
        let shown = if c.cumulative { value } else { value.wrapping_sub(c.saved) };
        write!(out, "{:>1$} ", shown, c.field_width + extra)?;
        if !c.cumulative {
            c.saved = value;
        }
        extra = 0;
    }
    out.flush()
}

/// After the last line of values, when a PMC was multiplexed (`--multiplex` and more PMCs than
/// counters): a comment line with the share of its time enabled each column was counted, as
/// `perf stat` prints `(50.00%)` after a scaled count (the values are scaled). FreeBSD's layout
/// has no such line, and never gets one without multiplexing.
pub fn write_counted(
    columns: &[Column],
    readings: &[pmc::ScaledValue],
    out: &mut dyn Write,
) -> io::Result<()> {
    write!(out, "\n# ")?;
    for (c, r) in columns.iter().zip(readings) {
        let shown = if r.running == 0 && r.multiplexed() {
            "-".to_owned()
        } else {
            format!("{:.2}%", 100.0 * r.fraction_counted())
        };
        write!(out, "{:>1$} ", shown, c.field_width)?;
    }
    out.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(f: impl FnOnce(&mut Vec<u8>)) -> String {
        let mut v = Vec::new();
        f(&mut v);
        String::from_utf8(v).unwrap()
    }

    #[test]
    fn a_64_bit_process_column_is_twenty_digits_wide_with_its_title_right_aligned() {
        let columns = [Column::new("task-clock", None, 64, false)];
        // 64 bits: floor(64 / 3.32193) + 1 = 20 columns; "p/task-clock" is 12, so 8 spaces first.
        let header = text(|o| write_header(&columns, false, o).unwrap());
        assert_eq!(header, format!("# {}p/task-clock ", " ".repeat(8)));
        assert_eq!(header.len(), 2 + 20 + 1);
    }

    #[test]
    fn a_system_column_prints_its_cpu_in_two_digits_left_aligned() {
        let columns = [Column::new("instructions", Some(3), 48, false)];
        // 48 bits: 15 digits; the title "s/03/instructions" is 17 > 15, so no padding.
        let header = text(|o| write_header(&columns, false, o).unwrap());
        assert_eq!(header, "# s/03/instructions ");
    }

    #[test]
    fn values_are_deltas_unless_cumulative_and_the_first_column_is_two_wider() {
        let mut columns = vec![Column::new("a", None, 64, false), Column::new("b", None, 64, true)];
        let first = text(|o| write_values(&mut columns, &[100, 7], None, o).unwrap());
        assert_eq!(first, format!("\n{:>22} {:>20} ", 100, 7));
        let second = text(|o| write_values(&mut columns, &[150, 9], None, o).unwrap());
        assert_eq!(second, format!("\n{:>22} {:>20} ", 50, 9));
    }

    #[test]
    fn the_counted_line_gives_each_column_its_share_of_time_under_its_title() {
        let columns = vec![Column::new("a", None, 64, false), Column::new("b", None, 64, false)];
        let half = pmc::ScaledValue { value: 5, enabled: 200, running: 100 };
        let never = pmc::ScaledValue { value: 0, enabled: 200, running: 0 };
        let line = text(|o| write_counted(&columns, &[half, never], o).unwrap());
        assert_eq!(line, format!("\n# {:>20} {:>20} ", "50.00%", "-"));
        let header = text(|o| write_header(&columns, false, o).unwrap());
        assert_eq!(header.len(), line.len() - 1, "under the titles");
    }

    #[test]
    fn a_timed_output_starts_each_line_with_the_seconds_since_the_start() {
        let mut columns = vec![Column::new("a", None, 64, false)];
        let header = text(|o| write_header(&columns, true, o).unwrap());
        assert_eq!(header, format!("#      seconds {:>20} ", "p/a"));
        let line = text(|o| {
            write_values(&mut columns, &[42], Some(std::time::Duration::from_millis(1500)), o)
                .unwrap()
        });
        assert_eq!(line, format!("\n{:>14} {:>20} ", "1.500", 42));
        // The columns line up with the header's titles.
        assert_eq!(header.len(), line.len() - 1);
    }
}
