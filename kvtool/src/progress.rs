//! Progress on stderr for kvtool's long work, one line per phase: a bar when the amount of
//! work is known, a spinner when it is not. indicatif draws nothing when stderr is not a
//! terminal, so pipes and logs get only the results.

use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

/// A bar of `len` steps, labelled `what`.
pub fn bar(len: u64, what: &str) -> ProgressBar {
    labelled(
        ProgressBar::new(len),
        what,
        "{prefix} {bar:30} {pos}/{len} eta {eta}",
    )
}

/// A bar of `len` bytes, labelled `what`.
pub fn bytes(len: u64, what: &str) -> ProgressBar {
    labelled(
        ProgressBar::new(len),
        what,
        "{prefix} {bar:30} {bytes}/{total_bytes} {binary_bytes_per_sec} eta {eta}",
    )
}

/// A counter of lines labelled `what`, for input of unknown length (a pipe).
pub fn lines(what: &str) -> ProgressBar {
    labelled(
        ProgressBar::new_spinner(),
        what,
        "{prefix} {spinner} {pos} lines {per_sec}",
    )
}

/// A spinner with the time spent, labelled `what`, for work that reports no progress
/// (waiting for compactions); it turns on its own.
pub fn waiting(what: &str) -> ProgressBar {
    let spinner = labelled(
        ProgressBar::new_spinner(),
        what,
        "{prefix} {spinner} {elapsed}",
    );
    if !spinner.is_hidden() {
        spinner.enable_steady_tick(Duration::from_millis(100));
    }
    spinner
}

/// Styles `progress` and draws it at once, so that even a phase too short to report any
/// progress shows what is being done.
fn labelled(progress: ProgressBar, what: &str, template: &str) -> ProgressBar {
    let style = ProgressStyle::with_template(template).expect("the templates above are valid");
    let progress = progress.with_style(style).with_prefix(what.to_string());
    progress.tick();
    progress
}
