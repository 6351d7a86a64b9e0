//! Prints a pmclog file as `pmcstat -R FILE` does: `cargo run -p pmclog --example dump -- FILE`.

use std::io::{BufWriter, Write};
use std::process::ExitCode;

fn main() -> ExitCode {
    let mut args = std::env::args_os().skip(1);
    let (Some(path), None) = (args.next(), args.next()) else {
        eprintln!("usage: dump LOGFILE");
        return ExitCode::from(64);
    };
    let file = match std::fs::File::open(&path) {
        Ok(file) => file,
        Err(e) => {
            eprintln!("dump: cannot open {}: {e}", path.to_string_lossy());
            return ExitCode::from(66);
        }
    };
    let stdout = std::io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    let end = pmclog::dump_reader(file, &mut out);
    let flushed = out.flush();
    match (end, flushed) {
        (Ok(end), Ok(())) => match end.error_message() {
            None => {
                if let Some(warning) = end.warning() {
                    eprintln!("dump: warning: {warning}");
                }
                ExitCode::SUCCESS
            }
            Some(message) => {
                eprintln!("dump: {message}");
                ExitCode::from(65)
            }
        },
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("dump: {}: {e}", path.to_string_lossy());
            ExitCode::from(74)
        }
    }
}
