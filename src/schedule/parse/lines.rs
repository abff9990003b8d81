//! The lines of the blocks of the schedule text: a stream block's and the host block's
//! (the grammar is in [`super::parse`]'s docs).

use super::{op_line, Cursor, LaneLine, Line, ParseError};
use crate::lower::OpId;
use crate::schedule::display::OpText;
use crate::schedule::{EventId, Step, StreamId};

/// An event number after `e`.
pub(super) fn event(c: &mut Cursor<'_>) -> Result<EventId, ParseError> {
    c.expect("e")?;
    Ok(EventId(c.number32("an event number")?.0))
}

/// A line of the block of stream `s`.
pub(super) fn stream_line(
    line: Line<'_>,
    text: &OpText,
    n_ops: usize,
    s: StreamId,
) -> Result<LaneLine, ParseError> {
    let mut c = Cursor::new(line, 0);
    c.space();
    let step = if c.rest().starts_with('#') {
        Step::Op(op_line(c, text, n_ops)?)
    } else {
        let step = if c.eat("record ") {
            Step::Record {
                event: event(&mut c)?,
                stream: s,
            }
        } else if c.eat("wait ") {
            Step::Wait {
                event: event(&mut c)?,
                stream: s,
            }
        } else if c.eat("host wait") {
            Step::HostWait { stream: s }
        } else if c.eat("await #") {
            let (n, column) = c.number("an op number")?;
            if n >= n_ops as u64 {
                return Err(ParseError::NoSuchOp {
                    line: line.no,
                    column,
                    op: n,
                    ops: n_ops,
                });
            }
            Step::HostAwait { op: OpId(n as u32) }
        } else {
            return Err(
                c.expected("`#N ...` (an op), `record eN`, `wait eN`, `host wait` or `await #N`")
            );
        };
        c.end()?;
        step
    };
    Ok(LaneLine {
        step,
        line: line.no,
        after: None,
        lane: 0,
    })
}

/// A line of the host block.
pub(super) fn host_line(
    line: Line<'_>,
    text: &OpText,
    n_ops: usize,
    lanes: u32,
) -> Result<LaneLine, ParseError> {
    let mut c = Cursor::new(line, 0);
    c.space();
    if c.rest().starts_with('#') {
        // `... on hN` with several lanes: the host op's lane.
        let trimmed = line.text.trim_end();
        let (op_text, lane) = match trimmed.rfind(" on h") {
            Some(at) if lanes > 1 => {
                let mut lc = Cursor::new(line, at + " on h".len());
                let (l, column) = lc.number32("a host lane number")?;
                lc.end()?;
                if l >= lanes {
                    return Err(ParseError::Expected {
                        line: line.no,
                        column,
                        expected: format!("a host lane from h0 to h{}", lanes - 1),
                        found: format!("h{l}"),
                    });
                }
                (&line.text[..at], l)
            }
            _ => (line.text, 0),
        };
        let c = Cursor::new(
            Line {
                no: line.no,
                text: op_text,
            },
            c.pos,
        );
        return Ok(LaneLine {
            step: Step::Op(op_line(c, text, n_ops)?),
            line: line.no,
            after: None,
            lane,
        });
    }
    if c.eat("await #") {
        let (n, column) = c.number("an op number")?;
        if n >= n_ops as u64 {
            return Err(ParseError::NoSuchOp {
                line: line.no,
                column,
                op: n,
                ops: n_ops,
            });
        }
        c.end()?;
        return Ok(LaneLine {
            step: Step::HostAwait { op: OpId(n as u32) },
            line: line.no,
            after: None,
            lane: 0,
        });
    }
    if !c.eat("wait ") {
        return Err(c.expected(
            "`#N ...` (an op), `await #N` or a host wait (`wait sN`, `wait eN`, `wait device N`)",
        ));
    }
    let step = if c.eat("device ") {
        let (device, _) = c.number32("a device number")?;
        c.expect(" (all streams)")?;
        c.end()?;
        return Ok(LaneLine {
            step: Step::HostWaitDevice { device },
            line: line.no,
            after: None,
            lane: 0,
        });
    } else if c.eat("s") {
        Step::HostWait {
            stream: StreamId(c.number32("a stream number")?.0),
        }
    } else if c.rest().starts_with('e') {
        Step::HostWaitEvent {
            event: event(&mut c)?,
        }
    } else {
        return Err(c.expected("`sN`, `eN` or `device N`"));
    };
    c.space();
    let column = c.column();
    let after = if c.eat("(after #") {
        let (n, _) = c.number32("an op number")?;
        c.expect(")")?;
        Some(OpId(n))
    } else {
        None
    };
    c.end()?;
    Ok(LaneLine {
        step,
        line: line.no,
        after: Some((after, column)),
        lane: 0,
    })
}
