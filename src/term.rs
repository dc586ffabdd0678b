//! Terminal output, the bottom floor (every module may use it; it names nothing of the
//! crate): the verbosity `-v` sets once, diagnostics (`diag!`: stderr, only with `-v`),
//! result lines (`outln!`: stdout, flushed line by line) and progress bars (stderr, only
//! when stderr is a terminal).
//!
//! Results go to stdout, everything else to stderr. A progress bar is one line at the
//! bottom of stderr: the bars alive at once (a soak's runs and the arm in progress) share
//! it, outermost first. It is never drawn on a pipe or a file, redrawn at most every
//! `REDRAW` (and by a ticker, so its clock moves while a long step runs), and cleared when
//! its last bar ends: on `finish`, on drop (an error returned through `?` drops it), and by
//! `clear` (the interrupt handlers call it before they print or leave). A line printed while
//! a bar is drawn (`outln!`, `diag!`, `eprint_line`) clears the bar, prints, and redraws it
//! below, so a bar never stays on screen between two lines of output.

use std::fmt::Arguments;
use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

static VERBOSE: AtomicU8 = AtomicU8::new(0);

/// Sets the verbosity once, from the count of `-v` flags (0: no diagnostics).
pub fn set_verbose(level: u8) {
    VERBOSE.store(level, Ordering::Relaxed);
}

/// The count of `-v` flags given.
pub fn verbose() -> u8 {
    VERBOSE.load(Ordering::Relaxed)
}

/// The least time between two redraws of the bar line (an update in between is drawn by
/// the next update or the ticker).
pub const REDRAW: Duration = Duration::from_millis(100);

/// How often the ticker redraws a bar line that nothing updated (the elapsed time moves).
const TICK: Duration = Duration::from_millis(500);

/// Erases the line the cursor is on and returns to its start (ANSI: CR, erase line).
const ERASE: &str = "\r\x1b[2K";

/// One bar: `label [=====>    ] done/total unit, message  12.3 s`.
#[derive(Clone, Debug)]
struct Item {
    id: u64,
    label: String,
    done: u64,
    total: u64,
    unit: &'static str,
    message: String,
    t0: Instant,
}

impl Item {
    /// The bar's text at `now`; `cells`: the width of its bar part (0: no bar part).
    fn render(&self, now: Instant, cells: usize) -> String {
        let mut s = self.label.clone();
        if cells > 0 && self.total > 0 {
            let full =
                ((self.done.min(self.total) as u128 * cells as u128) / self.total as u128) as usize;
            s.push_str(" [");
            s.push_str(&"=".repeat(full));
            if full < cells {
                s.push('>');
                s.push_str(&" ".repeat(cells - full - 1));
            }
            s.push(']');
        }
        s.push_str(&format!(" {}/{} {}", self.done, self.total, self.unit));
        if !self.message.is_empty() {
            s.push_str(", ");
            s.push_str(&self.message);
        }
        let secs = now.saturating_duration_since(self.t0).as_secs_f64();
        s.push_str(&format!("  {secs:.1} s"));
        s
    }
}

/// The bar line's state: the live bars (outermost first), whether the line is on screen,
/// and when it was last drawn. Pure state over a writer, so it is tested on a buffer.
#[derive(Debug, Default)]
struct Board {
    items: Vec<Item>,
    drawn: bool,
    last: Option<Instant>,
}

impl Board {
    /// The whole line at `now`, cut to `width` columns (a wrapped line could not be erased
    /// by one ERASE).
    fn line(&self, now: Instant, width: usize) -> String {
        let cells = if self.items.len() > 1 { 12 } else { 24 };
        let s = self
            .items
            .iter()
            .map(|i| i.render(now, cells))
            .collect::<Vec<_>>()
            .join("  |  ");
        let max = width.saturating_sub(1).max(1);
        if s.chars().count() <= max {
            s
        } else {
            s.chars().take(max).collect()
        }
    }

    /// Draws the line when `force` or `REDRAW` has passed since the last draw.
    fn draw(&mut self, w: &mut dyn Write, now: Instant, width: usize, force: bool) {
        if self.items.is_empty() {
            self.erase(w);
            return;
        }
        let due = self
            .last
            .is_none_or(|t| now.saturating_duration_since(t) >= REDRAW);
        if !(force || due) {
            return;
        }
        let _ = write!(w, "{ERASE}{}", self.line(now, width));
        let _ = w.flush();
        self.drawn = true;
        self.last = Some(now);
    }

    /// Takes the line off the screen (nothing when it is not drawn).
    fn erase(&mut self, w: &mut dyn Write) {
        if self.drawn {
            let _ = write!(w, "{ERASE}");
            let _ = w.flush();
            self.drawn = false;
        }
    }
}

static BOARD: Mutex<Board> = Mutex::new(Board {
    items: Vec::new(),
    drawn: false,
    last: None,
});
static NEXT_ID: AtomicU64 = AtomicU64::new(1);
static TICKER: AtomicBool = AtomicBool::new(false);

/// The board, also after a panic elsewhere held it (clearing the line is still right).
fn board() -> MutexGuard<'static, Board> {
    BOARD.lock().unwrap_or_else(|e| e.into_inner())
}

/// The terminal's width in columns (80 when it cannot be read).
fn width() -> usize {
    console::Term::stderr()
        .size_checked()
        .map_or(80, |(_, cols)| usize::from(cols).max(20))
}

/// Runs `f` with the bar line off the screen, then draws it again: how every line printed
/// while a bar may be drawn goes out.
fn above(f: impl FnOnce()) {
    let mut b = board();
    let mut err = std::io::stderr().lock();
    let was = b.drawn;
    b.erase(&mut err);
    f();
    if was {
        b.draw(&mut err, Instant::now(), width(), true);
    }
}

/// The first error writing stdout that is not a closed pipe (a full disk under `diff --json
/// > d.json`, an I/O error): the command's results did not reach where they were sent, which
/// `cli::main` reports and turns into exit 2 once the command is done.
static OUT_ERROR: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// `OUT_ERROR`, if a stdout write failed so.
pub fn out_error() -> Option<&'static str> {
    OUT_ERROR.get().map(String::as_str)
}

/// One result line on stdout, flushed at once (a pipe sees it when it is known), printed
/// above any progress bar. A closed stdout (EPIPE: `| head`) drops the line and the command
/// goes on (`outln!`); any other write error is kept for `out_error`.
pub fn out_line(args: Arguments) {
    above(|| {
        let mut o = std::io::stdout().lock();
        let r = o
            .write_fmt(args)
            .and_then(|_| o.write_all(b"\n"))
            .and_then(|_| o.flush());
        if let Err(e) = r {
            if e.kind() != std::io::ErrorKind::BrokenPipe {
                let _ = OUT_ERROR.set(e.to_string());
            }
        }
    });
}

/// One line on stderr, above any progress bar.
pub fn eprint_line(args: Arguments) {
    above(|| {
        let mut e = std::io::stderr().lock();
        let _ = e.write_fmt(args);
        let _ = e.write_all(b"\n");
        let _ = e.flush();
    });
}

/// A diagnostic line (`diag!`): stderr, only with `-v`.
pub fn diag(args: Arguments) {
    if verbose() > 0 {
        eprint_line(args);
    }
}

/// Takes every bar off the screen now and ends them (their handles then update nothing):
/// what an interrupt does before it prints its note or leaves the process.
pub fn clear() {
    let mut b = board();
    b.items.clear();
    b.erase(&mut std::io::stderr().lock());
}

/// The first bar drawn installs this, for the commands without an interrupt handler of
/// their own (soak and battery install theirs first, and call `clear`; ctrlc keeps the
/// first handler of a process): SIGINT, SIGTERM or SIGHUP clears the bar line and leaves
/// with 130 (128 + SIGINT, what a shell reports for Ctrl-C), so no frozen bar stays on
/// screen. Only a process that draws a bar (stderr a terminal) installs it: on a pipe the
/// signals keep their default action.
fn clear_on_signal() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let _ = ctrlc::set_handler(|| {
            clear();
            let _ = writeln!(std::io::stderr(), "ppn-gate: interrupted");
            std::process::exit(130);
        });
    });
}

/// The ticker: one thread for the process, redrawing the bar line every `TICK` while a
/// bar lives (a run of many seconds still shows its clock moving).
fn start_ticker() {
    if TICKER.swap(true, Ordering::SeqCst) {
        return;
    }
    let spawned = std::thread::Builder::new()
        .name("ppn-gate-bar".into())
        .spawn(|| loop {
            std::thread::sleep(TICK);
            let mut b = board();
            if !b.items.is_empty() {
                b.draw(
                    &mut std::io::stderr().lock(),
                    Instant::now(),
                    width(),
                    false,
                );
            }
        });
    if spawned.is_err() {
        // No thread: the bars are still drawn on every update.
        TICKER.store(false, Ordering::SeqCst);
    }
}

/// A progress bar on stderr's last line; hidden (every call a no-op) when stderr is not a
/// terminal or when asked (`-q`). Ended by `finish` or drop, whichever comes first.
#[derive(Debug)]
pub struct Bar {
    /// None: hidden.
    id: Option<u64>,
}

impl Bar {
    /// A bar of `total` `unit`s (`runs`, `steps`, `gates`) labelled `label`, drawn at once
    /// (at 0, so it shows from the first unit's start) when stderr is a terminal.
    pub fn new(label: impl Into<String>, total: usize, unit: &'static str) -> Bar {
        Bar::shown_if(std::io::stderr().is_terminal(), label, total, unit)
    }

    /// A bar that draws nothing.
    pub fn hidden() -> Bar {
        Bar { id: None }
    }

    /// `new` unless `quiet`.
    pub fn unless(quiet: bool, label: impl Into<String>, total: usize, unit: &'static str) -> Bar {
        if quiet {
            Bar::hidden()
        } else {
            Bar::new(label, total, unit)
        }
    }

    fn shown_if(show: bool, label: impl Into<String>, total: usize, unit: &'static str) -> Bar {
        if !show {
            return Bar::hidden();
        }
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        let mut b = board();
        b.items.push(Item {
            id,
            label: label.into(),
            done: 0,
            total: total as u64,
            unit,
            message: String::new(),
            t0: Instant::now(),
        });
        b.draw(&mut std::io::stderr().lock(), Instant::now(), width(), true);
        drop(b);
        start_ticker();
        clear_on_signal();
        Bar { id: Some(id) }
    }

    /// Whether this bar draws (stderr is a terminal and it was not hidden).
    pub fn is_shown(&self) -> bool {
        self.id.is_some()
    }

    fn update(&self, f: impl FnOnce(&mut Item)) {
        let Some(id) = self.id else { return };
        let mut b = board();
        let Some(item) = b.items.iter_mut().find(|i| i.id == id) else {
            return;
        };
        f(item);
        b.draw(
            &mut std::io::stderr().lock(),
            Instant::now(),
            width(),
            false,
        );
    }

    /// `done` units finished.
    pub fn set(&self, done: usize) {
        self.update(|i| i.done = done as u64);
    }

    /// One more unit finished.
    pub fn inc(&self) {
        self.update(|i| i.done += 1);
    }

    /// The text after the count (`3 PASS, 0 FAIL`).
    pub fn set_message(&self, m: impl Into<String>) {
        let m = m.into();
        self.update(|i| i.message = m);
    }

    /// Ends the bar: the line is redrawn without it, or erased when it was the last.
    pub fn finish(mut self) {
        self.end();
    }

    fn end(&mut self) {
        let Some(id) = self.id.take() else { return };
        let mut b = board();
        b.items.retain(|i| i.id != id);
        b.draw(&mut std::io::stderr().lock(), Instant::now(), width(), true);
    }
}

impl Drop for Bar {
    fn drop(&mut self) {
        self.end();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(id: u64, label: &str, done: u64, total: u64, t0: Instant) -> Item {
        Item {
            id,
            label: label.into(),
            done,
            total,
            unit: "runs",
            message: String::new(),
            t0,
        }
    }

    #[test]
    fn a_bar_renders_its_count_fill_message_and_clock() {
        let t0 = Instant::now();
        let mut i = item(1, "soak", 4, 50, t0);
        i.message = "4 PASS, 0 FAIL".into();
        let s = i.render(t0 + Duration::from_millis(2500), 10);
        assert_eq!(s, "soak [>         ] 4/50 runs, 4 PASS, 0 FAIL  2.5 s");
        i.done = 25;
        assert!(i.render(t0, 10).starts_with("soak [=====>    ] 25/50"));
        i.done = 50;
        assert!(i.render(t0, 10).starts_with("soak [==========] 50/50"));
        // More done than the total (a hostile count) and a total of 0 never panic or
        // overfill.
        i.done = 99;
        assert!(i.render(t0, 10).starts_with("soak [==========] 99/50"));
        i.total = 0;
        assert!(i.render(t0, 10).starts_with("soak 99/0 runs"));
    }

    #[test]
    fn nested_bars_share_one_line_cut_to_the_terminal_width() {
        let t0 = Instant::now();
        let b = Board {
            items: vec![item(1, "soak", 1, 3, t0), item(2, "pipelined", 7, 16, t0)],
            drawn: false,
            last: None,
        };
        let l = b.line(t0, 200);
        assert!(l.starts_with("soak ["), "{l}");
        assert!(l.contains("  |  pipelined ["), "{l}");
        for w in [1, 20, 40, 79] {
            let l = b.line(t0, w);
            assert!(l.chars().count() < w.max(2), "width {w}: {l:?}");
            assert!(!l.contains('\n'));
        }
    }

    /// Redraws are rate-limited (an update within REDRAW of the last draw writes nothing;
    /// a forced one and a late one do), the line is erased when the last bar ends, and an
    /// erase of a line not drawn writes nothing.
    #[test]
    fn redraws_are_rate_limited_and_the_last_bar_erases_the_line() {
        let t0 = Instant::now();
        let mut b = Board::default();
        let mut w = Vec::new();
        b.erase(&mut w);
        assert!(w.is_empty(), "nothing drawn, nothing erased");
        b.items.push(item(1, "soak", 0, 3, t0));
        b.draw(&mut w, t0, 80, false);
        let first = String::from_utf8(w.clone()).unwrap();
        assert!(
            first.starts_with(ERASE) && first.contains("0/3 runs"),
            "{first:?}"
        );
        b.items[0].done = 1;
        b.draw(&mut w, t0 + REDRAW / 2, 80, false);
        assert_eq!(w.len(), first.len(), "a redraw within REDRAW is skipped");
        b.draw(&mut w, t0 + REDRAW / 2, 80, true);
        assert!(String::from_utf8_lossy(&w[first.len()..]).contains("1/3 runs"));
        let n = w.len();
        b.items[0].done = 2;
        b.draw(&mut w, t0 + REDRAW * 3, 80, false);
        assert!(w.len() > n && String::from_utf8_lossy(&w[n..]).contains("2/3 runs"));
        b.items.clear();
        let n = w.len();
        b.draw(&mut w, t0 + REDRAW * 3, 80, true);
        assert_eq!(
            &w[n..],
            ERASE.as_bytes(),
            "the last bar gone: the line erased"
        );
        assert!(!b.drawn);
        let n = w.len();
        b.erase(&mut w);
        assert_eq!(w.len(), n, "erased once");
    }

    /// A hidden bar (as on a pipe) touches no state and draws nothing; `unless(true)` is
    /// hidden.
    #[test]
    fn hidden_bars_are_no_ops() {
        let b = Bar::unless(true, "x", 3, "runs");
        assert!(!b.is_shown());
        b.set(2);
        b.inc();
        b.set_message("m");
        b.finish();
        assert!(!Bar::shown_if(false, "y", 1, "runs").is_shown());
    }
}
