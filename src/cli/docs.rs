//! `schema`, `completions` and `man`: generated from the same definitions the binary uses.

use std::io::Write;

use clap::CommandFactory;

use super::Cli;
use crate::outcome::{EXIT_FAILED, EXIT_OK, EXIT_SIGPIPE};

/// Prints text to stdout; a closed stdout is exit 141.
pub fn print(text: &str) -> i32 {
    let mut out = std::io::stdout().lock();
    let line = if text.ends_with('\n') {
        text.to_string()
    } else {
        format!("{text}\n")
    };
    match out.write_all(line.as_bytes()).and_then(|_| out.flush()) {
        Ok(()) => EXIT_OK,
        Err(_) => EXIT_SIGPIPE,
    }
}

pub fn completions(shell: clap_complete::Shell) -> i32 {
    let mut buf = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "deerflow", &mut buf);
    print(&String::from_utf8_lossy(&buf))
}

pub fn man_page() -> std::io::Result<String> {
    let mut buf = Vec::new();
    clap_mangen::Man::new(Cli::command()).render(&mut buf)?;
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

pub fn man() -> i32 {
    match man_page() {
        Ok(s) => print(&s),
        Err(e) => {
            eprintln!("deerflow: cannot render the man page: {e}");
            EXIT_FAILED
        }
    }
}
