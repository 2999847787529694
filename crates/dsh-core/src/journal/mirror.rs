//! A copy of the journal for a reader who may be slow (`--json` on stdout).
//!
//! The journal never waits for its mirror: [`Mirror::push`] puts the line in a queue bounded
//! in bytes and returns; a thread of its own writes the queue out. A reader that falls behind
//! makes the queue grow up to its bound; past it, lines are dropped and counted
//! ([`Mirror::dropped`]) — the journal file always has them all. A mirror whose writes fail
//! (a closed pipe) stops quietly: the file is the record.

use std::collections::VecDeque;
use std::io::Write;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

/// The default bound of the queue: 16 MiB of lines.
pub const DEFAULT_CAPACITY: usize = 16 << 20;

#[derive(Default)]
struct Queue {
    lines: VecDeque<String>,
    bytes: usize,
    dropped: u64,
    /// A line is being written outside the lock.
    writing: bool,
    /// The writer gave up (its output failed); nothing more is queued.
    failed: bool,
}

struct Shared {
    queue: Mutex<Queue>,
    ready: Condvar,
    capacity: usize,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// See the module docs.
pub struct Mirror {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Mirror {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let q = self.shared.lock();
        f.debug_struct("Mirror")
            .field("queued", &q.lines.len())
            .field("dropped", &q.dropped)
            .finish_non_exhaustive()
    }
}

impl Mirror {
    /// Starts the writer thread over `out`, with a queue of at most `capacity` bytes.
    pub fn spawn(out: Box<dyn Write + Send>, capacity: usize) -> std::io::Result<Arc<Mirror>> {
        let shared = Arc::new(Shared {
            queue: Mutex::new(Queue::default()),
            ready: Condvar::new(),
            capacity,
        });
        let writer = shared.clone();
        std::thread::Builder::new()
            .name("dsh-mirror".to_owned())
            .spawn(move || write_out(&writer, out))?;
        Ok(Arc::new(Mirror { shared }))
    }

    /// Queues `line` (with its newline) without waiting; drops it when the queue is full.
    pub fn push(&self, line: &str) {
        let mut q = self.shared.lock();
        if q.failed {
            return;
        }
        if q.bytes + line.len() > self.shared.capacity {
            q.dropped += 1;
            return;
        }
        q.bytes += line.len();
        q.lines.push_back(line.to_owned());
        drop(q);
        self.shared.ready.notify_one();
    }

    /// Whether every queued line has been written (or the writer gave up).
    pub fn is_drained(&self) -> bool {
        let q = self.shared.lock();
        q.failed || (q.lines.is_empty() && !q.writing)
    }

    /// How many lines were dropped because the reader fell too far behind.
    pub fn dropped(&self) -> u64 {
        self.shared.lock().dropped
    }
}

fn write_out(shared: &Shared, mut out: Box<dyn Write + Send>) {
    loop {
        let line = {
            let mut q = shared.lock();
            loop {
                if let Some(line) = q.lines.pop_front() {
                    q.writing = true;
                    break line;
                }
                q = shared.ready.wait(q).unwrap_or_else(PoisonError::into_inner);
            }
        };
        let ok = out.write_all(line.as_bytes()).is_ok() && out.flush().is_ok();
        let mut q = shared.lock();
        q.writing = false;
        q.bytes = q.bytes.saturating_sub(line.len());
        if !ok {
            q.failed = true;
            q.lines.clear();
            q.bytes = 0;
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    /// A writer that blocks each write until the test lets it go.
    struct Gate(mpsc::Receiver<()>, mpsc::Sender<String>);

    impl Write for Gate {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.recv().map_err(|_| std::io::Error::other("closed"))?;
            let _ = self.1.send(String::from_utf8_lossy(buf).into_owned());
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_stuck_reader_never_blocks_push_and_overflow_is_counted() {
        let (open, gate) = mpsc::channel();
        let (seen_tx, seen) = mpsc::channel();
        let mirror = Mirror::spawn(Box::new(Gate(gate, seen_tx)), 10).unwrap();
        // The writer takes the first line and blocks in write; the queue then holds at most
        // 10 bytes.
        for i in 0..100 {
            mirror.push(&format!("{i:03}\n"));
        }
        assert_eq!(mirror.dropped(), 98);
        assert!(!mirror.is_drained());
        // Let everything through: the lines kept arrive in order.
        for _ in 0..100 {
            let _ = open.send(());
        }
        let first = seen.recv().unwrap();
        assert_eq!(first, "000\n");
        let mut kept = vec![first];
        while kept.len() as u64 + mirror.dropped() < 100 {
            kept.push(seen.recv().unwrap());
        }
        let mut sorted = kept.clone();
        sorted.sort();
        assert_eq!(kept, sorted);
    }

    #[test]
    fn a_failing_reader_stops_the_mirror_quietly() {
        struct Closed;
        impl Write for Closed {
            fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
                Err(std::io::ErrorKind::BrokenPipe.into())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let mirror = Mirror::spawn(Box::new(Closed), DEFAULT_CAPACITY).unwrap();
        mirror.push("a\n");
        // It ends drained (failed) without anyone waiting on it.
        while !mirror.is_drained() {
            std::thread::yield_now();
        }
        mirror.push("b\n");
        assert!(mirror.is_drained());
    }
}
