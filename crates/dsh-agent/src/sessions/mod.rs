//! Reading the sessions under `DSH_HOME/sessions` (DESIGN §4 `dsh sessions …`, §6): finding
//! one by id or prefix, summarizing each cheaply for `list`, and verifying a journal's chain
//! and its `resumed_from` links for `verify`. Front ends only render what this returns.
//!
//! A summary reads a file's first line (`session_start`) and its last lines, found by reading
//! backwards from the end: `stop` and `session_end` carry the totals (DESIGN §6), so a session
//! that ended costs two small reads whatever its length. Only a file that did not end (no
//! `session_end` last) is scanned whole, leniently, to count what it spent.
//!
//! A crash artefact (no complete first record, DESIGN §6; `leftovers.rs`) is no session: the
//! listing leaves it out without a word, and verifying it says what it is.

use std::collections::HashSet;
use std::fs::{File, TryLockError};
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use dsh_core::journal::{ReadError, Record, ResumedFrom, Totals, check_blobs, read_journal};
use serde::Deserialize;
use serde_json::Value;

use crate::leftovers::{Artefact, classify, crash_artefact};

mod chain;

pub use crate::session_id::sessions_dir;
pub use chain::{Chain, chains, newest_of};

/// Why a session could not be found or read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SessionsError {
    #[error("no session matches `{0}` (see `dsh sessions list`)")]
    Unknown(String),
    #[error("`{given}` is ambiguous: it is a prefix of {}", .matches.join(", "))]
    Ambiguous { given: String, matches: Vec<String> },
    #[error("cannot read {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {reason}")]
    Bad { path: String, reason: String },
    #[error(
        "{path} is a crash artefact, not a session: {what} (its process ended before its first record was complete); `dsh sessions prune` removes it"
    )]
    CrashArtefact { path: String, what: Artefact },
}

/// What a command-line `ID` found: the journal, and — when a `/save` name found it — the
/// record that save names, the point a resume branches from (DESIGN §6).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Found {
    pub path: PathBuf,
    pub point: Option<u64>,
}

/// The journal a command-line `ID` names: a journal file's path, a session id, a name given
/// with `/save`, or a unique prefix of an id — in that order (DESIGN §4): an exact id wins
/// over a name, a name over the ids it is a prefix of.
pub fn resolve(dsh_home: &Path, given: &str) -> Result<PathBuf, SessionsError> {
    find(dsh_home, given, None).map(|f| f.path)
}

/// [`resolve`], keeping the point a name saved; among sessions saved under the same name,
/// one of `workspace` (canonical) comes first, then the newest.
pub fn find(
    dsh_home: &Path,
    given: &str,
    workspace: Option<&Path>,
) -> Result<Found, SessionsError> {
    let as_path = Path::new(given);
    if (given.contains('/') || given.ends_with(".jsonl")) && as_path.is_file() {
        return Ok(Found {
            path: as_path.to_path_buf(),
            point: None,
        });
    }
    let dir = sessions_dir(dsh_home);
    let found = |id: &str| Found {
        path: dir.join(format!("{id}.jsonl")),
        point: None,
    };
    let mut matches: Vec<String> = ids(&dir)
        .into_iter()
        .filter(|id| id.starts_with(given))
        .collect();
    if given.is_empty() {
        return Err(SessionsError::Unknown(given.to_owned()));
    }
    if let Some(exact) = matches.iter().find(|id| *id == given) {
        return Ok(found(exact));
    }
    if let Some(named) = by_name(dsh_home, given, workspace) {
        return Ok(named);
    }
    match matches.len() {
        0 => Err(SessionsError::Unknown(given.to_owned())),
        1 => Ok(found(&matches[0])),
        _ => {
            matches.sort();
            Err(SessionsError::Ambiguous {
                given: given.to_owned(),
                matches,
            })
        }
    }
}

/// The session saved as `name` (a `session_named` record, the REPL's `/save NAME`), with the
/// point the save names: the newest of `workspace` if one is, else the newest of all. A file
/// saved under the name twice keeps its later save.
pub fn by_name(dsh_home: &Path, name: &str, workspace: Option<&Path>) -> Option<Found> {
    let (sessions, _) = list(dsh_home);
    let mine = |s: &&Summary| workspace.is_none_or(|w| s.workspace == w);
    let others = |s: &&Summary| !mine(s);
    for s in sessions
        .iter()
        .filter(mine)
        .chain(sessions.iter().filter(others))
    {
        if let Some(point) = saved_point(&s.path, name) {
            return Some(Found {
                path: s.path.clone(),
                point: Some(point),
            });
        }
    }
    None
}

/// One `session_named` record of a journal: its name, the point it saves, where it stands.
struct Save {
    name: String,
    point: u64,
    /// The record's own seq.
    at: u64,
    /// Written for the main agent.
    main: bool,
}

/// The `session_named` records of the journal at `path`, in order (none if it is unreadable).
fn saves(path: &Path) -> Vec<Save> {
    let Ok(text) = std::fs::read_to_string(path) else {
        return Vec::new();
    };
    text.lines()
        .filter(|l| l.contains("\"session_named\""))
        .filter_map(|l| parse(l.as_bytes()))
        .filter_map(|(env, r)| match r {
            Record::SessionNamed { name, point } => Some(Save {
                name: name.into_owned(),
                // Older journals name no point: the record before the save.
                point: point.unwrap_or(env.seq.saturating_sub(1)),
                at: env.seq,
                main: env.agent.is_none(),
            }),
            _ => None,
        })
        .collect()
}

/// The point the last `session_named` of `name` in the journal at `path` names, if any.
pub fn saved_point(path: &Path, name: &str) -> Option<u64> {
    saves(path)
        .into_iter()
        .rev()
        .find(|s| s.name == name)
        .map(|s| s.point)
}

/// Whether the journal at `path` saved the point `seq` under some name: a resume may branch
/// from it although more records follow. Only the main agent's save, naming a record before
/// itself.
fn is_saved_point(path: &Path, seq: u64) -> bool {
    saves(path)
        .iter()
        .any(|s| s.main && s.point == seq && seq < s.at)
}

/// The ids (file stems) of every `*.jsonl` in `dir`.
fn ids(dir: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            name.strip_suffix(".jsonl").map(str::to_owned)
        })
        .collect()
}

/// How a session ended, as far as its file says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum End {
    /// `session_end`'s reason: `finished`, `interrupted`, …
    Ended(String),
    /// No `session_end`, and nobody holds the file's lock: the process died.
    DidNotEnd,
    /// No `session_end` yet, and another process holds the lock: it is still being written.
    Running,
}

impl End {
    pub fn as_str(&self) -> &str {
        match self {
            End::Ended(r) => r,
            End::DidNotEnd => "did_not_end",
            End::Running => "running",
        }
    }
}

/// One line of `dsh sessions list`.
#[derive(Clone, Debug)]
pub struct Summary {
    pub id: String,
    pub path: PathBuf,
    /// `session_start`'s `ts`.
    pub started: String,
    pub workspace: PathBuf,
    pub provider: Option<String>,
    pub model: Option<String>,
    /// From `stop`/`session_end`; for a session that did not end, counted from its
    /// `llm_call` records (steps: the main agent's; tokens: every agent's), with no cost.
    pub totals: Totals,
    /// The `stop` record's reason; `None` when the process died before writing one.
    pub stop: Option<String>,
    pub end: End,
    pub resumed_from: Option<ResumedFrom<'static>>,
}

/// Every session under `dsh_home`, newest first (by start time, then id), with the files that
/// could not be summarized (not a journal, unreadable) apart. Crash artefacts are neither.
pub fn list(dsh_home: &Path) -> (Vec<Summary>, Vec<SessionsError>) {
    let dir = sessions_dir(dsh_home);
    let (mut ok, mut bad) = (Vec::new(), Vec::new());
    for id in ids(&dir) {
        match summarize(&dir.join(format!("{id}.jsonl"))) {
            Ok(s) => ok.push(s),
            Err(SessionsError::CrashArtefact { .. }) => {}
            Err(e) => bad.push(e),
        }
    }
    ok.sort_by(|a: &Summary, b: &Summary| (&b.started, &b.id).cmp(&(&a.started, &a.id)));
    (ok, bad)
}

/// The envelope fields a summary needs.
#[derive(Deserialize)]
struct Envelope {
    #[serde(default)]
    seq: u64,
    #[serde(default)]
    ts: String,
    #[serde(default)]
    session: String,
    #[serde(default)]
    agent: Option<String>,
}

/// A line as envelope and record, or why not.
fn parse(line: &[u8]) -> Option<(Envelope, Record<'static>)> {
    let value: Value = serde_json::from_slice(line).ok()?;
    let env = Envelope::deserialize(&value).ok()?;
    let record = Record::deserialize(&value).ok()?;
    Some((env, record))
}

/// How many bytes from the end are read at first when looking for the last records.
const TAIL_CHUNK: u64 = 8 * 1024;

/// Summarizes one journal from its first and last records (module docs).
pub fn summarize(path: &Path) -> Result<Summary, SessionsError> {
    let display = || path.display().to_string();
    let io = |source| SessionsError::Io {
        path: display(),
        source,
    };
    let bad = |reason: &str| SessionsError::Bad {
        path: display(),
        reason: reason.to_owned(),
    };
    let mut file = File::open(path).map_err(io)?;
    let mut first = Vec::new();
    let mut reader = BufReader::new(&mut file);
    reader.read_until(b'\n', &mut first).map_err(io)?;
    if let Some(what) = classify(&first, &mut reader).map_err(io)? {
        return Err(SessionsError::CrashArtefact {
            path: display(),
            what,
        });
    }
    first.pop();
    let Some((
        env,
        Record::SessionStart {
            workspace,
            provider,
            model,
            resumed_from,
            ..
        },
    )) = parse(&first)
    else {
        return Err(bad("the first record is not a session_start"));
    };
    let id = path
        .file_stem()
        .and_then(|s| s.to_str())
        .map(str::to_owned)
        .unwrap_or(env.session);
    let (last, before_last) = last_two_lines(&mut file).map_err(io)?;
    let (totals, stop, end) = match last.as_deref().and_then(parse) {
        Some((_, Record::SessionEnd { reason, totals, .. })) => {
            let stop = match before_last.as_deref().and_then(parse) {
                Some((_, Record::Stop { reason, .. })) => Some(reason.into_owned()),
                _ => None,
            };
            (totals, stop, End::Ended(reason.into_owned()))
        }
        _ => {
            let (totals, stop) = scan(path).map_err(io)?;
            (totals, stop, lock_state(&file))
        }
    };
    Ok(Summary {
        id,
        path: path.to_path_buf(),
        started: env.ts,
        workspace: workspace.into_owned(),
        provider: provider.map(|p| p.into_owned()),
        model: model.map(|m| m.into_owned()),
        totals,
        stop,
        end,
        resumed_from,
    })
}

/// One line's bytes, without its newline.
type Line = Vec<u8>;

/// The file's last two complete lines (a torn tail after the last newline is ignored), read
/// backwards from the end in growing chunks.
fn last_two_lines(file: &mut File) -> std::io::Result<(Option<Line>, Option<Line>)> {
    let len = file.seek(SeekFrom::End(0))?;
    let mut want = TAIL_CHUNK.min(len);
    loop {
        file.seek(SeekFrom::Start(len - want))?;
        let mut buf = Vec::with_capacity(want as usize);
        file.by_ref().take(want).read_to_end(&mut buf)?;
        // Drop the torn tail: everything after the last newline.
        let Some(end) = buf.iter().rposition(|&b| b == b'\n') else {
            if want == len {
                return Ok((None, None));
            }
            want = (want * 4).min(len);
            continue;
        };
        let complete = &buf[..end];
        let mut lines = complete.rsplitn(3, |&b| b == b'\n');
        let last = lines.next();
        let before = lines.next();
        // Two whole lines need a newline before the second-to-last, unless the chunk starts
        // at the beginning of the file.
        let whole = want == len || lines.next().is_some();
        if whole {
            return Ok((last.map(<[u8]>::to_vec), before.map(<[u8]>::to_vec)));
        }
        want = (want * 4).min(len);
    }
}

/// For a file that did not end: the main agent's model calls, the tokens of every agent's
/// (a sub-agent's spend is its parent's), and the last `stop` reason, read leniently (a line
/// that does not parse is skipped).
fn scan(path: &Path) -> std::io::Result<(Totals, Option<String>)> {
    let reader = BufReader::new(File::open(path)?);
    let mut totals = Totals::default();
    let mut stop = None;
    for line in reader.split(b'\n') {
        match parse(&line?) {
            Some((
                Envelope { agent, .. },
                Record::LlmCall {
                    prompt_tokens,
                    completion_tokens,
                    ..
                },
            )) => {
                if agent.is_none() {
                    totals.steps += 1;
                }
                totals.prompt_tokens += prompt_tokens;
                totals.completion_tokens += completion_tokens;
            }
            Some((
                Envelope { agent: None, .. },
                Record::Stop {
                    reason, totals: t, ..
                },
            )) => {
                stop = Some(reason.into_owned());
                totals = t;
            }
            _ => {}
        }
    }
    Ok((totals, stop))
}

/// Whether another process holds the journal's lock: it is still being written (its writer
/// keeps the lock until it exits). A file that cannot be opened is not open.
pub fn is_open(path: &Path) -> bool {
    File::open(path).is_ok_and(|f| lock_state(&f) == End::Running)
}

/// Whether another process holds the file's lock (its writer keeps it until it exits). The
/// lock is taken shared and dropped at once.
fn lock_state(file: &File) -> End {
    match file.try_lock_shared() {
        Ok(()) => {
            let _ = file.unlock();
            End::DidNotEnd
        }
        Err(TryLockError::WouldBlock) => End::Running,
        Err(TryLockError::Error(_)) => End::DidNotEnd,
    }
}

/// What `dsh sessions verify` found in one file.
#[derive(Debug)]
pub struct FileCheck {
    pub path: PathBuf,
    /// Complete records that verified (all of them when `problem` is `None`).
    pub records: usize,
    /// The first broken record, if any.
    pub problem: Option<Problem>,
    /// The torn last line (no newline), if any, and the line number it would have had.
    pub torn_tail: Option<(usize, usize)>,
    /// The file has no `session_end` (intact, but it did not end, or is still running).
    pub did_not_end: bool,
    /// The file is a crash artefact, not a session (then `problem` is `None`).
    pub artefact: Option<Artefact>,
    /// Another process holds the file's lock (only looked at for a crash artefact: one still
    /// open may yet get its first record).
    pub open: bool,
}

/// The first broken record of a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// 1-based; records' `seq` equal their line numbers.
    pub line: usize,
    pub what: String,
}

/// Verifies the journal at `path` and, through `session_start.resumed_from`, every session it
/// resumes (looked up in the same directory), oldest last. Stops at a missing file or a
/// cycle.
pub fn verify(path: &Path) -> Vec<FileCheck> {
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    let mut next = Some(path.to_path_buf());
    while let Some(path) = next.take() {
        let key = path.canonicalize().unwrap_or_else(|_| path.clone());
        if !seen.insert(key) {
            break;
        }
        let (mut check, link) = verify_file(&path);
        let Some(link) = link else {
            out.push(check);
            break;
        };
        // A link names a session of the same directory by its id, never a path.
        if !crate::session_id::looks_like(&link.session) {
            if check.problem.is_none() {
                check.problem = Some(Problem {
                    line: 1,
                    what: format!(
                        "resumed_from names {}, which is not a session id",
                        dsh_core::quote_capped(&link.session)
                    ),
                });
            }
            out.push(check);
            break;
        }
        let linked = path
            .parent()
            .unwrap_or(Path::new("."))
            .join(format!("{}.jsonl", link.session));
        match check_link(&linked, &link) {
            Ok(()) => next = Some(linked),
            Err(what) => {
                if check.problem.is_none() {
                    check.problem = Some(Problem { line: 1, what });
                }
            }
        }
        out.push(check);
    }
    out
}

fn verify_file(path: &Path) -> (FileCheck, Option<ResumedFrom<'static>>) {
    let mut check = FileCheck {
        path: path.to_path_buf(),
        records: 0,
        problem: None,
        torn_tail: None,
        did_not_end: false,
        artefact: None,
        open: false,
    };
    if let Ok(Some(what)) = crash_artefact(path) {
        check.artefact = Some(what);
        check.open = is_open(path);
        return (check, None);
    }
    let transcript = match read_journal(path) {
        Ok(t) => t,
        Err(e) => {
            check.problem = Some(problem_of(&e));
            return (check, None);
        }
    };
    check.records = transcript.records.len();
    check.torn_tail = transcript
        .torn_tail
        .as_ref()
        .map(|t| (check.records + 1, t.len()));
    let mut link = None;
    match transcript.records.first().map(|e| &e.record) {
        Some(Record::SessionStart { resumed_from, .. }) => link = resumed_from.clone(),
        Some(_) => {
            check.problem = Some(Problem {
                line: 1,
                what: "the first record is not a session_start".to_owned(),
            });
        }
        None => {
            check.problem = Some(Problem {
                line: 1,
                what: "the file has no complete record".to_owned(),
            });
        }
    }
    if check.problem.is_none()
        && let Some(first) = transcript.records.first()
        && let Some(other) = transcript
            .records
            .iter()
            .find(|e| e.session != first.session)
    {
        check.problem = Some(Problem {
            line: other.seq as usize,
            what: format!(
                "its session is `{}`, the file's first record says `{}`",
                other.session, first.session
            ),
        });
    }
    // Each argument stored beside the journal exists and hashes to its name.
    if check.problem.is_none()
        && let Err(e) = check_blobs(path, &transcript)
    {
        check.problem = Some(problem_of(&e));
    }
    check.did_not_end = !matches!(
        transcript.records.last().map(|e| &e.record),
        Some(Record::SessionEnd { .. })
    );
    (check, link)
}

/// Whether `resumed_from` names a record that exists with that hash, and is the old file's
/// last complete record (the old file is never written again, DESIGN §6) or a point a
/// `session_named` saved (`/load NAME` branches from it).
fn check_link(linked: &Path, link: &ResumedFrom<'_>) -> Result<(), String> {
    let named = format!(
        "resumed_from names session {} record {}",
        link.session, link.seq
    );
    if !linked.is_file() {
        return Err(format!("{named}, but {} does not exist", linked.display()));
    }
    // The linked file's own chain is checked when it is verified next; here only what the
    // link claims. A broken chain there is reported there.
    let Ok(transcript) = read_journal(linked) else {
        return Ok(());
    };
    let Some(entry) = transcript.records.iter().find(|e| e.seq == link.seq) else {
        return Err(format!(
            "{named}, but {} has only {} records",
            linked.display(),
            transcript.records.len()
        ));
    };
    if entry.hash != link.hash {
        return Err(format!(
            "{named} with hash {}, but that record's hash is {}",
            link.hash, entry.hash
        ));
    }
    if transcript.records.len() as u64 > link.seq && !is_saved_point(linked, link.seq) {
        return Err(format!(
            "{named}, but {} has {} records: it was written after it was resumed",
            linked.display(),
            transcript.records.len()
        ));
    }
    Ok(())
}

fn problem_of(e: &ReadError) -> Problem {
    let (line, what) = match e {
        ReadError::Io { .. } => (0, e.to_string()),
        ReadError::NotJson { line, reason, .. } => (*line, format!("not a JSON object: {reason}")),
        ReadError::BadRecord { line, reason, .. } => {
            (*line, format!("not a journal record: {reason}"))
        }
        ReadError::BadSeq {
            line,
            expected,
            found,
            ..
        } => (
            *line,
            match found {
                Some(f) => {
                    format!("seq is {f}, expected {expected}: a record is missing or out of order")
                }
                None => format!("no seq, expected {expected}"),
            },
        ),
        ReadError::BrokenChain { line, .. } => (
            line - 1,
            format!(
                "its hash is not line {line}'s `prev`: this record (or line {line}'s `prev`) was changed"
            ),
        ),
        ReadError::BadGenesis { line, .. } => (
            *line,
            "the first record's `prev` is not 64 zeros".to_owned(),
        ),
        ReadError::Blob { line, reason, .. } => (*line, reason.clone()),
        _ => (0, e.to_string()),
    };
    Problem { line, what }
}
