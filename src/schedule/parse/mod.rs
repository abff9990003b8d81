//! Reading the schedule text back: [`parse`] turns what `Display for Schedule` prints
//! into the same [`Schedule`], given the [`OpGraph`] it was made for. So a schedule can be
//! kept as a file, edited by hand and verified (tests/verifier/ holds such cases).
//!
//! The grammar and its meaning are on [`parse`].

use super::display::{item, lane_name, plural, Afters, OpText};
use super::lanes::{canonical_order, Item};
use super::{
    Schedule, Step, StreamId, StreamInfo, SyncPolicy, MAX_HOST_LANES, MAX_STREAMS_PER_DEVICE,
};
use crate::lower::{OpGraph, OpId};

mod error;
mod lines;
use lines::{host_line, stream_line};
#[cfg(test)]
mod tests;

pub use error::ParseError;

/// Reads a schedule text (what `Display for Schedule` prints) for `graph`.
///
/// Arguments: the text (grammar in the module docs) and the op graph the schedule was
/// made for (op descriptions are checked against it; its device count and the text's
/// pool give the streams). Returns the schedule: for a text `Display` printed,
/// `parse(&s.to_string(), graph) == Ok(s)`.
///
/// # Grammar
///
/// Line by line; `N` is a decimal number, `NAME` any text without a line break. Block
/// headers, the issue order and the summary start at column 1, block lines are indented
/// (by any whitespace; the text uses two spaces). Blank lines are ignored anywhere, runs
/// of spaces inside a line count as one, a `\r` before a line break is dropped.
///
/// ```text
/// text       = header { block } [ order ] summary
/// header     = 'schedule "' NAME '" policy=' POLICY ' streams=' N ' (pool ' N ' per device)'
///              [ ' host lanes=' N ]
/// block      = stream | host
/// stream     = 's' N ' (device ' N [ ', high priority' ] '):'
///              { INDENT ( op | 'record e' N | 'wait e' N | 'host wait' | await ) }
/// host       = 'host:' { INDENT ( op [ ' on h' N ] | hostwait | await ) }
/// hostwait   = 'wait s' N [ ' (after #' N ')' ] | 'wait e' N [ ' (after #' N ')' ]
///            | 'wait device ' N ' (all streams)'
/// await      = 'await #' N
/// op         = '#' N DESCRIPTION
/// order      = 'issue order: ' LANE ' ' N { ', ' LANE ' ' N }      LANE = 's' N | 'host'
/// summary    = 'summary: ' N ' ops, ' N ' stream[s], ' N ' event[s], ' N ' host wait[s]'
/// POLICY     = 'per-op' | 'per-region' | 'minimal'
/// ```
///
/// Issue order: each block lists its lane's steps in issue order. With an `order` line
/// the lanes interleave as it says: runs of lanes, each with how many of its next lines
/// are issued in a row. Without one (all the scheduler makes), by this rule: every lane is
/// cut into one group per op line: the op, the lines *leading* it (issued just before) and
/// the lines *trailing* it (issued just after). In a stream block an event wait, and every
/// line after it up to the next op, leads that op; any other line (a record, a host wait)
/// trails the op above it. In the host block every host wait leads the host op below it.
/// The groups are issued in the order of their ops' ids, the lowest first among every
/// lane's next group; lines after a lane's last op are issued at the end, streams first.
/// `Display` prints a host wait in the block of the stream it waits on when it comes right
/// after an op of that stream and before a device op, else in the host block, and prints
/// an `order` line exactly when the rule would not give the schedule's steps back.
///
/// Meaning:
/// - `op`: [`Step::Op`]; the op is on the block's stream (`host`: on none). Its
///   `DESCRIPTION` must be the graph's: kind, section, bytes, kernel, region, as printed.
///   An op may be listed twice in one block (issued twice), not in two blocks; an op of
///   the graph listed nowhere is on no stream and never issued (the verifier says so).
/// - in a stream block: `record eN` is [`Step::Record`], `wait eN` [`Step::Wait`], and
///   `host wait` [`Step::HostWait`] on that stream.
/// - in the host block: `wait sN` is [`Step::HostWait`], `wait eN`
///   [`Step::HostWaitEvent`], `wait device N` [`Step::HostWaitDevice`]; a host op's
///   ` on hN` (only with ` host lanes=N` in the header, N ≥ 2) its host lane
///   ([`Schedule::op_lane`]; `h0` when left out).
/// - `await #N`, in either block: [`Step::HostAwait`] of host op `#N`; in a stream block
///   it leads the op below it (the issuing thread awaits a host op before that device op).
/// - who runs a host wait or await (a host lane, or the issuing thread) follows from its
///   place: [`Schedule::wait_owners`].
/// - the streams are those of the pool size (`pool`) on each of the graph's devices:
///   stream `d · pool + k` is stream `k` of device `d`, as [`super::assign_streams`]
///   makes them; a block header must name an existing stream and its device, and
///   `, high priority` marks the device's high-priority stream
///   ([`StreamInfo::high_priority`]; a stream without a block has none).
/// - the summary's event count is the schedule's number of events (ids `e0..`); event
///   ids are not checked against it (the verifier reports an event that does not exist).
///
/// Everything the text derives must agree with the schedule it describes, so a text that
/// parses is what `Display` prints for the result, up to blank lines, spacing and the
/// block order: the header's `streams=` (streams with ops), every `(after #k)` (left out
/// exactly where `Display` leaves it out), the summary's op, stream and host-wait counts.
///
/// Errors: the first problem, with its line and column ([`ParseError`]). Never panics.
/// The result is not verified: run [`crate::verify::verify`] on it.
///
/// Complexity: `O(T + V + K log L)` for `T` bytes of text, `V` ops, `K` steps and `L`
/// lanes (streams plus the host); `O(V + K)` memory.
///
/// ```
/// use offload_sched::model::{ElemType, Init, MapType, ProgramBuilder};
/// use offload_sched::schedule::{parse, schedule, ScheduleOptions};
///
/// let mut p = ProgramBuilder::new("inc");
/// let x = p.buffer("x", ElemType::F32, 256, Init::Iota);
/// p.target("inc", "increment").arg(x).map(MapType::ToFrom, x);
/// let graph = offload_sched::lower::lower(&p.build()).unwrap();
/// let s = schedule(&graph, &ScheduleOptions::default());
/// assert_eq!(parse(&s.to_string(), &graph), Ok(s));
/// ```
pub fn parse(text: &str, graph: &OpGraph) -> Result<Schedule, ParseError> {
    Parser::new(text, graph).run()
}

/// One line of the text: its number (from 1) and its text without the line break.
#[derive(Clone, Copy)]
struct Line<'t> {
    no: usize,
    text: &'t str,
}

/// A position in one line, for reading tokens.
struct Cursor<'t> {
    line: Line<'t>,
    pos: usize,
}

/// How much of the text an error quotes.
const QUOTE_CHARS: usize = 40;

fn quote(s: &str) -> String {
    let s = s.trim_end();
    if s.is_empty() {
        return "end of line".into();
    }
    let mut q: String = s.chars().take(QUOTE_CHARS).collect();
    if s.chars().nth(QUOTE_CHARS).is_some() {
        q.push('…');
    }
    format!("`{q}`")
}

impl<'t> Cursor<'t> {
    fn new(line: Line<'t>, pos: usize) -> Cursor<'t> {
        Cursor { line, pos }
    }

    fn rest(&self) -> &'t str {
        self.line.text.get(self.pos..).unwrap_or("")
    }

    /// The column of byte offset `pos` of the line.
    fn column_at(&self, pos: usize) -> usize {
        self.line
            .text
            .get(..pos)
            .map_or(1, |s| s.chars().count() + 1)
    }

    fn column(&self) -> usize {
        self.column_at(self.pos)
    }

    fn expected(&self, what: impl Into<String>) -> ParseError {
        ParseError::Expected {
            line: self.line.no,
            column: self.column(),
            expected: what.into(),
            found: quote(self.rest()),
        }
    }

    /// Skips spaces and tabs.
    fn space(&mut self) {
        let rest = self.rest();
        self.pos += rest.len() - rest.trim_start_matches([' ', '\t']).len();
    }

    /// Consumes `lit` if the text continues with it.
    fn eat(&mut self, lit: &str) -> bool {
        if self.rest().starts_with(lit) {
            self.pos += lit.len();
            true
        } else {
            false
        }
    }

    /// Consumes `lit`, or fails naming it.
    fn expect(&mut self, lit: &str) -> Result<(), ParseError> {
        if self.eat(lit) {
            Ok(())
        } else {
            Err(self.expected(match lit.trim() {
                "" => "a space".to_string(),
                t => format!("`{t}`"),
            }))
        }
    }

    /// Consumes a decimal number; returns it and its column.
    fn number(&mut self, what: &str) -> Result<(u64, usize), ParseError> {
        let rest = self.rest();
        let digits = rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        let column = self.column();
        if digits == 0 {
            return Err(self.expected(what.to_string()));
        }
        match rest[..digits].parse::<u64>() {
            Ok(n) => {
                self.pos += digits;
                Ok((n, column))
            }
            Err(_) => Err(self.expected(format!("{what} (a number below 2^64)"))),
        }
    }

    /// A number that fits in 32 bits.
    fn number32(&mut self, what: &str) -> Result<(u32, usize), ParseError> {
        let at = self.pos;
        let (n, column) = self.number(what)?;
        match u32::try_from(n) {
            Ok(n) => Ok((n, column)),
            Err(_) => {
                self.pos = at;
                Err(self.expected(format!("{what} (a number below 2^32)")))
            }
        }
    }

    /// Only spaces (or nothing) remain.
    fn end(&mut self) -> Result<(), ParseError> {
        self.space();
        if self.rest().is_empty() {
            Ok(())
        } else {
            Err(self.expected("end of line"))
        }
    }
}

/// One line of a block, read.
struct LaneLine {
    step: Step,
    line: usize,
    /// For a host wait in the host block on a stream or an event: the op its
    /// `(after #k)` names (`None`: left out) and the column where it is (or would be).
    after: Option<(Option<OpId>, usize)>,
    /// For a host op: its host lane (` on hN`; 0 when left out).
    lane: u32,
}

/// A run of the `issue order:` line: lane, count, where.
struct Run {
    lane: u32,
    count: u64,
    line: usize,
    column: usize,
}

struct Parser<'t, 'g> {
    lines: Vec<Line<'t>>,
    at: usize,
    graph: &'g OpGraph,
}

/// What the header says.
struct Header {
    name: String,
    policy: SyncPolicy,
    /// `streams=`: `(value, line, column)`.
    streams: (u64, usize, usize),
    pool: u32,
    /// ` host lanes=N` (1 when absent).
    host_lanes: u32,
}

impl<'t, 'g> Parser<'t, 'g> {
    fn new(text: &'t str, graph: &'g OpGraph) -> Parser<'t, 'g> {
        let lines = text
            .split('\n')
            .enumerate()
            .map(|(i, l)| Line {
                no: i + 1,
                text: l.strip_suffix('\r').unwrap_or(l),
            })
            .filter(|l| !l.text.trim().is_empty())
            .collect();
        Parser {
            lines,
            at: 0,
            graph,
        }
    }

    /// The position just past the last line, for "found end of text".
    fn end_of_text(&self, expected: &str) -> ParseError {
        let (line, column) = self
            .lines
            .last()
            .map_or((1, 1), |l| (l.no, l.text.chars().count() + 1));
        ParseError::Expected {
            line,
            column,
            expected: expected.into(),
            found: "end of text".into(),
        }
    }

    fn run(mut self) -> Result<Schedule, ParseError> {
        const HEADER: &str =
            "a header `schedule \"NAME\" policy=POLICY streams=N (pool N per device)`";
        let Some(&first) = self.lines.first() else {
            return Err(self.end_of_text(HEADER));
        };
        self.at = 1;
        let header = header(first, HEADER)?;
        let graph = self.graph;
        let pool = header.pool;
        let devices = graph.devices.max(1);
        let nstreams = devices as usize * pool as usize;
        let host = nstreams as u32;
        let n_ops = graph.ops.len();
        let text = OpText::new(graph, pool);

        let mut lanes: Vec<Vec<LaneLine>> = (0..=nstreams).map(|_| Vec::new()).collect();
        let mut block_line: Vec<Option<usize>> = vec![None; nstreams + 1];
        // Per op: its lane and the line it was first listed at.
        let mut op_lane: Vec<Option<(u32, usize)>> = vec![None; n_ops];
        let mut lane: Option<u32> = None;
        let mut order: Option<(Vec<Run>, usize)> = None;
        let mut high_priority = vec![false; nstreams];
        let summary = loop {
            let Some(&line) = self.lines.get(self.at) else {
                return Err(self.end_of_text("a block, `issue order:` or `summary:`"));
            };
            self.at += 1;
            let indented = line.text.starts_with([' ', '\t']);
            if indented {
                let Some(l) = lane else {
                    let mut c = Cursor::new(line, 0);
                    c.space();
                    return Err(c.expected("a block header (`sN (device N):` or `host:`) first"));
                };
                let read = if l == host {
                    host_line(line, &text, n_ops, header.host_lanes)?
                } else {
                    stream_line(line, &text, n_ops, StreamId(l))?
                };
                if let Step::Op(op) = read.step {
                    let slot = &mut op_lane[op.index()];
                    match *slot {
                        None => *slot = Some((l, line.no)),
                        Some((first, first_line)) if first != l => {
                            let mut c = Cursor::new(line, 0);
                            c.space();
                            return Err(ParseError::OpInTwoBlocks {
                                line: line.no,
                                column: c.column(),
                                op,
                                first: lane_name(first, host),
                                first_line,
                            });
                        }
                        Some(_) => {}
                    }
                }
                lanes[l as usize].push(read);
                continue;
            }
            let mut c = Cursor::new(line, 0);
            if c.eat("summary:") {
                break c;
            }
            if c.eat("issue order:") {
                if let Some((_, first_line)) = order {
                    return Err(ParseError::DuplicateBlock {
                        line: line.no,
                        column: 1,
                        block: "`issue order:`".into(),
                        first_line,
                    });
                }
                order = Some((issue_order(c, host, nstreams)?, line.no));
                lane = None;
                continue;
            }
            let l = if c.eat("host:") {
                c.end()?;
                host
            } else if c.eat("s") {
                let (s, column) = c.number("a stream number")?;
                if s >= nstreams as u64 {
                    return Err(ParseError::NoSuchStream {
                        line: line.no,
                        column,
                        stream: s,
                        devices,
                        pool,
                    });
                }
                c.expect(" (device ")?;
                let (d, dcol) = c.number("a device number")?;
                let want = s as u32 / pool;
                if d != want as u64 {
                    return Err(ParseError::WrongDevice {
                        line: line.no,
                        column: dcol,
                        stream: StreamId(s as u32),
                        expected: want,
                        found: d,
                        pool,
                    });
                }
                if c.eat(", high priority") {
                    high_priority[s as usize] = true;
                }
                c.expect("):")?;
                c.end()?;
                s as u32
            } else {
                return Err(c.expected(
                    "a block header (`sN (device N):` or `host:`), an indented line, \
                     `issue order:` or `summary:`",
                ));
            };
            if let Some(first_line) = block_line[l as usize] {
                return Err(ParseError::DuplicateBlock {
                    line: line.no,
                    column: 1,
                    block: lane_name(l, host),
                    first_line,
                });
            }
            block_line[l as usize] = Some(line.no);
            lane = Some(l);
        };
        let summary_line = summary.line.no;
        let counts = summary_counts(summary)?;
        if let Some(&extra) = self.lines.get(self.at) {
            return Err(Cursor::new(extra, 0).expected("end of text after the summary"));
        }
        // Each event is recorded by a step, so there are at most as many as steps (which
        // also bounds what the schedule's users allocate per event by the text's size).
        let n_steps: usize = lanes.iter().map(Vec::len).sum();
        if counts.events.0 as usize > n_steps {
            return Err(ParseError::Disagrees {
                line: summary_line,
                column: counts.events.1,
                what: "the number of events (each recorded by a step)".into(),
                stated: counts.events.0.to_string(),
                actual: format!("at most {n_steps}"),
            });
        }

        // The issue order: as the text says, or by the rule.
        let order: Vec<(u32, u32)> = match order {
            Some((runs, _)) => explicit_order(&runs, &lanes, host)?,
            None => {
                let items: Vec<Vec<Item>> = lanes
                    .iter()
                    .enumerate()
                    .map(|(l, ls)| ls.iter().map(|x| item(&x.step, l as u32, host)).collect())
                    .collect();
                canonical_order(&items)
            }
        };
        let steps: Vec<Step> = order
            .iter()
            .map(|&(l, j)| lanes[l as usize][j as usize].step)
            .collect();
        let sched = Schedule {
            name: header.name,
            policy: header.policy,
            streams: (0..nstreams)
                .map(|i| StreamInfo {
                    device: (i / pool as usize) as u32,
                    high_priority: high_priority[i],
                })
                .collect(),
            op_stream: op_lane
                .iter()
                .map(|x| x.and_then(|(l, _)| (l != host).then_some(StreamId(l))))
                .collect(),
            steps,
            events: counts.events.0,
            host_lanes: header.host_lanes,
            op_lane: {
                let mut on = vec![0u32; n_ops];
                for read in &lanes[host as usize] {
                    if let Step::Op(op) = read.step {
                        on[op.index()] = read.lane;
                    }
                }
                on
            },
            text,
        };

        // What the text derives must be what the schedule gives.
        let mut afters = Afters::new(&sched);
        for (step, &(l, j)) in sched.steps.iter().zip(&order) {
            let actual = afters.step(&sched, step);
            let read = &lanes[l as usize][j as usize];
            if let Some((stated, column)) = read.after {
                if stated != actual {
                    let show = |a: Option<OpId>| {
                        a.map_or("nothing".to_string(), |op| format!("`(after {op})`"))
                    };
                    let what = match step {
                        Step::HostWaitEvent { event } => {
                            format!("the op {event} was last recorded after")
                        }
                        _ => "the last op on the stream before this host wait".to_string(),
                    };
                    return Err(ParseError::Disagrees {
                        line: read.line,
                        column,
                        what,
                        stated: show(stated),
                        actual: show(actual),
                    });
                }
            }
        }
        let used = sched.used_streams();
        let hw = sched.host_waits().count();
        for (what, (stated, line, column), actual) in [
            ("the number of streams with ops", header.streams, used),
            ("the number of ops", counts.ops, n_ops),
            ("the number of streams with ops", counts.streams, used),
            ("the number of host waits", counts.host_waits, hw),
        ] {
            if stated != actual as u64 {
                return Err(ParseError::Disagrees {
                    line,
                    column,
                    what: what.into(),
                    stated: stated.to_string(),
                    actual: actual.to_string(),
                });
            }
        }
        Ok(sched)
    }
}

/// Reads the header line.
fn header(line: Line<'_>, expected: &str) -> Result<Header, ParseError> {
    let mut c = Cursor::new(line, 0);
    if !c.eat("schedule \"") {
        return Err(c.expected(expected));
    }
    let Some(end) = c.rest().rfind("\" policy=") else {
        return Err(c.expected("a name in quotes, then ` policy=`"));
    };
    let name = crate::model::unescape_quoted(&c.rest()[..end]);
    c.pos += end + "\" policy=".len();
    let word = c.rest().split(' ').next().unwrap_or("");
    let Some(policy) = SyncPolicy::parse(word) else {
        return Err(c.expected("a policy: `per-op`, `per-region` or `minimal`"));
    };
    c.pos += word.len();
    c.expect(" streams=")?;
    let (streams, scol) = c.number("the number of streams with ops")?;
    c.expect(" (pool ")?;
    let at = c.pos;
    let (pool, _) = c.number32("the pool size")?;
    if pool == 0 || pool > MAX_STREAMS_PER_DEVICE {
        c.pos = at;
        return Err(c.expected(format!("a pool size from 1 to {MAX_STREAMS_PER_DEVICE}")));
    }
    c.expect(" per device)")?;
    let mut host_lanes = 1;
    if c.eat(" host lanes=") {
        let at = c.pos;
        let (n, _) = c.number32("the number of host lanes")?;
        if !(2..=MAX_HOST_LANES).contains(&n) {
            c.pos = at;
            return Err(c.expected(format!("a number of host lanes from 2 to {MAX_HOST_LANES}")));
        }
        host_lanes = n;
    }
    c.end()?;
    Ok(Header {
        name,
        policy,
        streams: (streams, line.no, scol),
        pool,
        host_lanes,
    })
}

/// An op line after the indentation: `#N DESCRIPTION`, checked against the graph.
fn op_line(mut c: Cursor<'_>, text: &OpText, n_ops: usize) -> Result<OpId, ParseError> {
    let start = c.pos;
    c.expect("#")?;
    let (n, column) = c.number("an op number")?;
    if n >= n_ops as u64 {
        return Err(ParseError::NoSuchOp {
            line: c.line.no,
            column,
            op: n,
            ops: n_ops,
        });
    }
    let op = OpId(n as u32);
    let want = text.describe(op);
    let found = c.line.text[start..].trim_end();
    let mut got = tokens(found);
    let mut exp = want.split_whitespace();
    loop {
        match (got.next(), exp.next()) {
            (None, None) => return Ok(op),
            (g, e) if g.map(|x| x.1) == e => continue,
            (g, _) => {
                let column = g.map_or(c.column_at(c.line.text.len()), |(at, _)| {
                    c.column_at(start + at)
                });
                return Err(ParseError::WrongOp {
                    line: c.line.no,
                    column,
                    op,
                    expected: want.split_whitespace().collect::<Vec<_>>().join(" "),
                    found: found.split_whitespace().collect::<Vec<_>>().join(" "),
                });
            }
        }
    }
}

/// The whitespace-separated tokens of `s` with their byte offsets.
fn tokens(s: &str) -> impl Iterator<Item = (usize, &str)> {
    s.split([' ', '\t'])
        .scan(0usize, |at, t| {
            let here = *at;
            *at += t.len() + 1;
            Some((here, t))
        })
        .filter(|(_, t)| !t.is_empty())
}

/// The runs of an `issue order:` line (after the colon).
fn issue_order(mut c: Cursor<'_>, host: u32, nstreams: usize) -> Result<Vec<Run>, ParseError> {
    let mut runs = Vec::new();
    loop {
        c.space();
        let column = c.column();
        let lane = if c.eat("host") {
            host
        } else if c.eat("s") {
            let (s, scol) = c.number("a stream number")?;
            if s >= nstreams as u64 {
                return Err(ParseError::Expected {
                    line: c.line.no,
                    column: scol,
                    expected: format!("a stream from s0 to s{}", nstreams - 1),
                    found: format!("`s{s}`"),
                });
            }
            s as u32
        } else {
            return Err(c.expected("a lane (`sN` or `host`)"));
        };
        c.expect(" ")?;
        c.space();
        let (count, _) = c.number("how many of its lines are issued in a row")?;
        runs.push(Run {
            lane,
            count,
            line: c.line.no,
            column,
        });
        c.space();
        if !c.eat(",") {
            c.end()?;
            return Ok(runs);
        }
    }
}

/// The issue order an `issue order:` line gives, checked against the blocks' lengths.
fn explicit_order(
    runs: &[Run],
    lanes: &[Vec<LaneLine>],
    host: u32,
) -> Result<Vec<(u32, u32)>, ParseError> {
    let mut next = vec![0u64; lanes.len()];
    let mut out = Vec::new();
    for r in runs {
        let l = r.lane as usize;
        let have = lanes[l].len() as u64;
        if next[l] + r.count > have {
            return Err(ParseError::Disagrees {
                line: r.line,
                column: r.column,
                what: format!(
                    "the number of lines in the {} block",
                    lane_name(r.lane, host)
                ),
                stated: format!("at least {}", next[l] + r.count),
                actual: have.to_string(),
            });
        }
        out.extend((next[l]..next[l] + r.count).map(|j| (r.lane, j as u32)));
        next[l] += r.count;
    }
    if let (Some(l), Some(last)) = (
        (0..lanes.len()).find(|&l| next[l] != lanes[l].len() as u64),
        runs.last(),
    ) {
        return Err(ParseError::Disagrees {
            line: last.line,
            column: 1,
            what: format!(
                "the number of lines in the {} block",
                lane_name(l as u32, host)
            ),
            stated: next[l].to_string(),
            actual: lanes[l].len().to_string(),
        });
    }
    Ok(out)
}

/// The summary's counts: `(value, line, column)` each.
struct Counts {
    ops: (u64, usize, usize),
    streams: (u64, usize, usize),
    /// `(value, column)`.
    events: (u32, usize),
    host_waits: (u64, usize, usize),
}

/// Reads the rest of the summary line (after `summary:`).
fn summary_counts(mut c: Cursor<'_>) -> Result<Counts, ParseError> {
    let line = c.line.no;
    let ops = count(&mut c, "op", true)?;
    let streams = count(&mut c, "stream", false)?;
    c.expect(",")?;
    c.expect(" ")?;
    let (events, ecol) = c.number32("the number of events")?;
    c.expect(&format!(" event{}", plural(events.min(2) as usize)))?;
    let host_waits = count(&mut c, "host wait", false)?;
    c.end()?;
    Ok(Counts {
        ops: (ops.0, line, ops.1),
        streams: (streams.0, line, streams.1),
        events: (events, ecol),
        host_waits: (host_waits.0, line, host_waits.1),
    })
}

/// `[, ]N WORD[s]` of the summary: the number and its column.
fn count(c: &mut Cursor<'_>, word: &str, first: bool) -> Result<(u64, usize), ParseError> {
    if !first {
        c.expect(",")?;
    }
    c.expect(" ")?;
    let (n, column) = c.number(&format!("the number of {word}s"))?;
    // `Display` writes `ops` whatever the count.
    let s = if word == "op" {
        "s"
    } else {
        plural(n.min(2) as usize)
    };
    c.expect(&format!(" {word}{s}"))?;
    Ok((n, column))
}
