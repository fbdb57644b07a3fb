//! What a simulated container writes to its log, and the kubelet's log options
//! (`/containerLogs`: `sinceSeconds`/`sinceTime`, `tailLines`, `timestamps`, `limitBytes`).
//!
//! The log is derived from the container's command line, as its behaviour is in [`crate::program`]:
//! a shell script's `echo`/`printf`/`date` print a line at the virtual time the script reaches
//! them, `sleep N` moves that time on, and `while true; do …; done` repeats its body forever (a
//! body that never sleeps is cut after [`ZERO_TIME_LINES`] lines instead of filling the log in
//! one instant). A container with no command runs its image's entrypoint: for well-known images
//! (nginx, mysql, redis) a short start-up banner, simulated, is printed when it starts. The lines
//! of an instance are a pure function of (command, image, start time), so a log read twice is
//! the same log, and `follow` just waits for the next line's time.

use std::collections::VecDeque;
use std::time::Duration;

use jiff::Timestamp;

use crate::program::split_statements;
use crate::runtime::after;
use crate::shell::printf;

/// Lines a loop that never sleeps prints before klab stops modelling it.
pub const ZERO_TIME_LINES: usize = 1000;

/// One step of a container's simulated output.
#[derive(Clone, Debug, PartialEq)]
enum Step {
    /// Print these lines.
    Print(Vec<String>),
    /// Print the date (`date`).
    Date,
    /// Print a line with `$(date)` substituted when it is printed.
    WithDate(String),
    /// Time passes.
    Sleep(Duration),
    /// The program prints nothing more (it blocks, exits, or runs something klab does not model).
    Stop,
}

/// A program's output as a schedule: `steps`, and from `loop_from` on the steps repeat forever.
#[derive(Clone, Debug, PartialEq)]
pub struct LogScript {
    steps: Vec<Step>,
    loop_from: Option<usize>,
}

impl LogScript {
    /// Reads the output schedule from a container's `command`, `args` and image.
    pub fn from_container(command: &[String], args: &[String], image: &str) -> LogScript {
        let argv: Vec<&str> = command
            .iter()
            .chain(args.iter())
            .map(String::as_str)
            .collect();
        let Some(&bin) = argv.first() else {
            return LogScript {
                steps: vec![Step::Print(banner(image)), Step::Stop],
                loop_from: None,
            };
        };
        let base = bin.rsplit('/').next().unwrap_or(bin);
        if matches!(base, "sh" | "bash" | "ash" | "dash") && argv.get(1) == Some(&"-c") {
            return script(argv.get(2).copied().unwrap_or(""));
        }
        let words: Vec<String> = argv.iter().map(|s| s.to_string()).collect();
        let mut steps = Vec::new();
        statement(&words, &mut steps);
        steps.push(Step::Stop);
        LogScript {
            steps,
            loop_from: None,
        }
    }

    /// The lines of an instance started at `started_at`, in order, lazily (a loop is endless).
    pub fn lines(&self, started_at: Timestamp) -> LogLines {
        LogLines {
            script: self.clone(),
            pc: 0,
            at: started_at,
            pending: VecDeque::new(),
            zero_time: 0,
            done: false,
        }
    }
}

/// The start-up banner of a well-known image (simulated: believable, not byte-exact).
fn banner(image: &str) -> Vec<String> {
    let name = image.rsplit('/').next().unwrap_or(image);
    let (repo, tag) = name.split_once(':').unwrap_or((name, "latest"));
    let lines: Vec<String> = match repo {
        "nginx" => vec![
            "/docker-entrypoint.sh: /docker-entrypoint.d/ is not empty, will attempt to perform configuration".into(),
            "/docker-entrypoint.sh: Looking for shell scripts in /docker-entrypoint.d/".into(),
            "/docker-entrypoint.sh: Launching /docker-entrypoint.d/10-listen-on-ipv6-by-default.sh".into(),
            "10-listen-on-ipv6-by-default.sh: info: Enabled listen on IPv6 in /etc/nginx/conf.d/default.conf".into(),
            "/docker-entrypoint.sh: Launching /docker-entrypoint.d/20-envsubst-on-templates.sh".into(),
            "/docker-entrypoint.sh: Launching /docker-entrypoint.d/30-tune-worker-processes.sh".into(),
            "/docker-entrypoint.sh: Configuration complete; ready for start up".into(),
            "[notice] 1#1: using the \"epoll\" event method".into(),
            format!("[notice] 1#1: nginx/{tag}"),
            "[notice] 1#1: start worker processes".into(),
        ],
        "mysql" | "mariadb" => vec![
            format!("[Note] [Entrypoint]: Entrypoint script for MySQL Server {tag} started."),
            "[Note] [Entrypoint]: Switching to dedicated user 'mysql'".into(),
            "[System] [MY-010116] [Server] /usr/sbin/mysqld starting as process 1".into(),
            "[System] [MY-010931] [Server] /usr/sbin/mysqld: ready for connections. Socket: '/var/run/mysqld/mysqld.sock'  port: 3306  MySQL Community Server - GPL.".into(),
        ],
        "redis" | "valkey" => vec![
            "1:C # oO0OoO0OoO0Oo Redis is starting oO0OoO0OoO0Oo".into(),
            format!("1:C # Redis version={tag}, bits=64, pid=1, just started"),
            "1:M * Running mode=standalone, port=6379.".into(),
            "1:M * Server initialized".into(),
            "1:M * Ready to accept connections tcp".into(),
        ],
        _ => vec![],
    };
    lines
}

fn script(text: &str) -> LogScript {
    let mut steps = Vec::new();
    let mut loop_from = None;
    for words in split_statements(text) {
        let mut words = words;
        match words.first().map(String::as_str) {
            Some("while") | Some("until") if loop_from.is_none() => {
                loop_from = Some(steps.len());
                continue;
            }
            Some("do") => {
                words.remove(0);
            }
            Some("done") if loop_from.is_some() => {
                // `while true` never ends: nothing after the loop runs. A loop that prints
                // nothing (`while true; do sleep 1; done`) writes no more lines: stop there
                // instead of iterating it for ever.
                let prints = loop_from.is_some_and(|from| {
                    steps.get(from..).is_some_and(|body| {
                        body.iter()
                            .any(|s| matches!(s, Step::Print(_) | Step::Date | Step::WithDate(_)))
                    })
                });
                if !prints {
                    steps.push(Step::Stop);
                    return LogScript {
                        steps,
                        loop_from: None,
                    };
                }
                return LogScript { steps, loop_from };
            }
            _ => {}
        }
        if statement(&words, &mut steps) {
            steps.push(Step::Stop);
            return LogScript {
                steps,
                loop_from: None,
            };
        }
    }
    // An unterminated loop is taken as written up to where the script ends.
    if loop_from.is_none() {
        steps.push(Step::Stop);
    }
    LogScript { steps, loop_from }
}

/// Appends the output of one simple statement; true when the program prints nothing after it.
fn statement(words: &[String], steps: &mut Vec<Step>) -> bool {
    let Some(first) = words.first() else {
        return false;
    };
    // Output redirected to a file (or discarded) does not reach the log; `>&2` still does.
    let redirected = words
        .iter()
        .any(|w| w.starts_with('>') && !w.starts_with(">&"));
    let words: Vec<&str> = words
        .iter()
        .map(String::as_str)
        .take_while(|w| !w.starts_with('>') && !w.starts_with("1>") && !w.starts_with("2>"))
        .collect();
    let base = first.rsplit('/').next().unwrap_or(first);
    match base {
        "echo" => {
            let args: Vec<&str> = words[1..]
                .iter()
                .copied()
                .skip_while(|w| *w == "-n" || *w == "-e")
                .collect();
            if !redirected {
                let line = args.join(" ");
                steps.push(if line.contains("$(date)") {
                    Step::WithDate(line)
                } else {
                    Step::Print(vec![line])
                });
            }
            false
        }
        "printf" => {
            if !redirected && let Some(fmt) = words.get(1) {
                let text = printf(fmt, &words[2..]);
                let lines: Vec<String> = text.lines().map(String::from).collect();
                if !lines.is_empty() {
                    steps.push(Step::Print(lines));
                }
            }
            false
        }
        "date" => {
            if !redirected {
                steps.push(Step::Date);
            }
            false
        }
        "sleep" => match words.get(1).map(|n| n.trim_end_matches('s').parse::<f64>()) {
            Some(Ok(v)) if v >= 0.0 && v.is_finite() => {
                match Duration::try_from_secs_f64(v) {
                    Ok(d) => steps.push(Step::Sleep(d)),
                    Err(_) => return true,
                }
                false
            }
            _ => true,
        },
        "true" | ":" | "false" | "trap" | "hostname" | "env" => false,
        _ => true,
    }
}

/// busybox `date`'s default format: `Wed Nov 25 00:43:31 UTC 2026`.
pub fn date_line(t: Timestamp) -> String {
    t.strftime("%a %b %e %H:%M:%S UTC %Y").to_string()
}

/// The lines of one container instance, in time order.
pub struct LogLines {
    script: LogScript,
    pc: usize,
    at: Timestamp,
    pending: VecDeque<String>,
    zero_time: usize,
    done: bool,
}

impl Iterator for LogLines {
    type Item = (Timestamp, String);

    fn next(&mut self) -> Option<(Timestamp, String)> {
        loop {
            if let Some(l) = self.pending.pop_front() {
                return Some((self.at, l));
            }
            if self.done {
                return None;
            }
            let step = match self.script.steps.get(self.pc) {
                Some(s) => s.clone(),
                None => match self.script.loop_from {
                    Some(from) if from < self.script.steps.len() => {
                        self.pc = from;
                        continue;
                    }
                    _ => {
                        self.done = true;
                        continue;
                    }
                },
            };
            self.pc += 1;
            match step {
                Step::Print(lines) => {
                    self.zero_time += lines.len();
                    self.pending.extend(lines);
                }
                Step::Date => {
                    self.zero_time += 1;
                    self.pending.push_back(date_line(self.at));
                }
                Step::WithDate(line) => {
                    self.zero_time += 1;
                    self.pending
                        .push_back(line.replace("$(date)", &date_line(self.at)));
                }
                Step::Sleep(d) if !d.is_zero() => {
                    self.at = after(self.at, d);
                    self.zero_time = 0;
                }
                Step::Sleep(_) => {}
                Step::Stop => self.done = true,
            }
            if self.zero_time > ZERO_TIME_LINES {
                self.pending.clear();
                self.done = true;
            }
        }
    }
}

/// The kubelet's `PodLogOptions` (already validated by the API server).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LogOptions {
    pub follow: bool,
    pub previous: bool,
    pub timestamps: bool,
    /// Lines at or after this time only (`sinceSeconds` is turned into a time by the caller).
    pub since: Option<Timestamp>,
    pub tail_lines: Option<u64>,
    pub limit_bytes: Option<u64>,
}

/// `RFC3339NanoFixed`, the kubelet's timestamp prefix format.
pub fn format_timestamp(t: Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%S.%9fZ").to_string()
}

/// One log line as the kubelet writes it (optional timestamp prefix, newline).
pub fn render(at: Timestamp, line: &str, timestamps: bool) -> String {
    if timestamps {
        format!("{} {line}\n", format_timestamp(at))
    } else {
        format!("{line}\n")
    }
}

/// How much of a container's log the kubelet keeps readable: its current log file, rotated at
/// `containerLogMaxSize` (10Mi by default); older lines are gone.
pub const CONTAINER_LOG_MAX_SIZE: usize = 10 * 1024 * 1024;

/// The lines already written by `until` that the options select (since, then tail), from the
/// last [`CONTAINER_LOG_MAX_SIZE`] bytes of the log (so a long-running chatty container never
/// makes a request hold more than that).
pub fn select(
    lines: &mut LogLines,
    until: Timestamp,
    opts: &LogOptions,
) -> Vec<(Timestamp, String)> {
    let mut out: VecDeque<(Timestamp, String)> = VecDeque::new();
    let mut bytes = 0usize;
    for (at, l) in lines.by_ref() {
        if at > until {
            // Hand the line back to the follower: it is the next one to wait for.
            lines.pending.push_front(l);
            lines.at = at;
            break;
        }
        if opts.since.is_some_and(|s| at < s) {
            continue;
        }
        bytes = bytes.saturating_add(l.len().saturating_add(1));
        out.push_back((at, l));
        if let Some(n) = opts.tail_lines
            && out.len() as u64 > n
            && let Some((_, gone)) = out.pop_front()
        {
            bytes = bytes.saturating_sub(gone.len().saturating_add(1));
        }
        while bytes > CONTAINER_LOG_MAX_SIZE {
            let Some((_, gone)) = out.pop_front() else {
                break;
            };
            bytes = bytes.saturating_sub(gone.len().saturating_add(1));
        }
    }
    out.into()
}

/// The bytes budget of `limitBytes`: cuts the output once it is spent.
#[derive(Clone, Copy, Debug)]
pub struct Budget(Option<u64>);

impl Budget {
    pub fn new(limit: Option<u64>) -> Budget {
        Budget(limit)
    }

    /// The part of `chunk` still within the budget (cut at a byte, as the kubelet does, even
    /// inside a UTF-8 sequence).
    pub fn take(&mut self, chunk: String) -> bytes::Bytes {
        let mut b = chunk.into_bytes();
        if let Some(left) = &mut self.0 {
            let n = (*left).min(b.len() as u64) as usize;
            *left -= n as u64;
            b.truncate(n);
        }
        bytes::Bytes::from(b)
    }

    pub fn spent(&self) -> bool {
        self.0 == Some(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &[&str]) -> Vec<String> {
        s.iter().map(|x| x.to_string()).collect()
    }

    fn t(s: i64) -> Timestamp {
        Timestamp::from_second(1_767_225_600 + s).unwrap()
    }

    fn upto(cmd: &[&str], image: &str, secs: i64) -> Vec<(i64, String)> {
        let mut l = LogScript::from_container(&v(cmd), &[], image).lines(t(0));
        select(&mut l, t(secs), &LogOptions::default())
            .into_iter()
            .map(|(at, s)| (at.as_second() - t(0).as_second(), s))
            .collect()
    }

    #[test]
    fn only_the_current_log_file_is_kept() {
        // 100-byte lines every millisecond for ten minutes: 60 MB written, 10 MiB readable.
        let line = "x".repeat(99);
        let cmd = format!("while true; do echo {line}; sleep 0.001; done");
        let mut l = LogScript::from_container(&v(&["sh", "-c", &cmd]), &[], "busybox").lines(t(0));
        let got = select(&mut l, t(600), &LogOptions::default());
        assert_eq!(got.len(), CONTAINER_LOG_MAX_SIZE / 100);
        assert_eq!(got.last().map(|(at, _)| *at), Some(t(600)));
    }

    #[test]
    fn a_loop_that_prints_nothing_ends_the_log() {
        // `while true; do sleep 1; done` is a common pod command: its log is what came before.
        assert_eq!(
            upto(
                &["sh", "-c", "echo up; while true; do sleep 1; done"],
                "busybox",
                3600
            ),
            vec![(0, "up".into())]
        );
        assert_eq!(
            upto(&["sh", "-c", "while true; do sleep 0; done"], "busybox", 10),
            vec![]
        );
        let mut l = LogScript::from_container(
            &v(&["sh", "-c", "while true; do sleep 1; done"]),
            &[],
            "busybox",
        )
        .lines(t(0));
        assert_eq!(l.next(), None);
    }

    #[test]
    fn scripts_print_at_their_virtual_times() {
        assert_eq!(
            upto(
                &["sh", "-c", "while true; do echo hello; sleep 1; done"],
                "busybox",
                2
            ),
            vec![
                (0, "hello".into()),
                (1, "hello".into()),
                (2, "hello".into())
            ]
        );
        assert_eq!(
            upto(
                &["sh", "-c", "echo start; sleep 5; echo done; sleep 3600"],
                "busybox",
                100
            ),
            vec![(0, "start".into()), (5, "done".into())]
        );
        assert_eq!(
            upto(
                &[
                    "sh",
                    "-c",
                    "while true; do echo tick $(date); sleep 60; done"
                ],
                "b",
                60
            ),
            vec![
                (0, "tick Thu Jan  1 00:00:00 UTC 2026".into()),
                (60, "tick Thu Jan  1 00:01:00 UTC 2026".into())
            ]
        );
        assert_eq!(
            upto(&["echo", "a", "b"], "busybox", 10),
            vec![(0, "a b".into())]
        );
        assert_eq!(
            upto(
                &["sh", "-c", "printf 'x=%s\\ny\\n' 7; echo hi > /tmp/f"],
                "busybox",
                1
            ),
            vec![(0, "x=7".into()), (0, "y".into())]
        );
        assert_eq!(
            upto(&["sh", "-c", "date; sleep 60; date"], "busybox", 60),
            vec![
                (0, "Thu Jan  1 00:00:00 UTC 2026".into()),
                (60, "Thu Jan  1 00:01:00 UTC 2026".into())
            ]
        );
        // Nothing after a blocking command, nothing from a plain sleep.
        assert_eq!(upto(&["sh", "-c", "nginx; echo never"], "x", 10), vec![]);
        assert_eq!(upto(&["sleep", "3600"], "busybox", 10), vec![]);
        let nginx = upto(&[], "nginx:1.27", 0);
        assert_eq!(nginx.len(), 10);
        assert_eq!(nginx[8].1, "[notice] 1#1: nginx/1.27");
        assert!(upto(&[], "registry.k8s.io/pause:3.9", 10).is_empty());
    }

    #[test]
    fn a_loop_that_never_sleeps_is_cut() {
        let l = upto(
            &["sh", "-c", "while true; do echo spin; done"],
            "busybox",
            0,
        );
        assert!(l.len() <= ZERO_TIME_LINES + 1, "{}", l.len());
        assert!(l.len() >= ZERO_TIME_LINES - 1);
    }

    #[test]
    fn options_select_since_and_tail() {
        let script = LogScript::from_container(
            &v(&["sh", "-c", "while true; do date; sleep 10; done"]),
            &[],
            "b",
        );
        let opts = LogOptions {
            since: Some(t(25)),
            tail_lines: Some(2),
            ..Default::default()
        };
        let mut lines = script.lines(t(0));
        let got: Vec<i64> = select(&mut lines, t(100), &opts)
            .into_iter()
            .map(|(at, _)| at.as_second() - t(0).as_second())
            .collect();
        assert_eq!(got, vec![90, 100]);
        // The follower resumes with the next line.
        assert_eq!(lines.next().unwrap().0, t(110));
        assert_eq!(
            render(t(1), "x", true),
            "2026-01-01T00:00:01.000000000Z x\n"
        );
        let mut b = Budget::new(Some(5));
        assert_eq!(b.take("hello\n".into()), "hello");
        assert!(b.spent());
        assert_eq!(b.take("more\n".into()), "");
        let mut b = Budget::new(Some(2));
        assert_eq!(b.take("é!".into()).len(), 2);
    }
}
