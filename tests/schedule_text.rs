//! The schedule text reads back (`schedule::parse`): for every schedule the scheduler
//! makes, `parse(display(s)) == s` and `display(parse(display(s))) == display(s)`, over
//! every graph of graphs/ under each policy, with the default pool and random streams,
//! and over random programs (the generator of tests/prop_programs.rs). The parser never
//! panics: on garbage, and on schedule texts mutated at random (lines dropped, doubled,
//! moved, characters changed), where every text it accepts also prints and reads back to
//! the same schedule and goes through the verifier.
//!
//! Cases: 64 by default, `PROPTEST_CASES=N` to change.

mod common;
#[path = "common/programs.rs"]
mod programs;

use offload_sched::lower::{lower, OpGraph};
use offload_sched::schedule::{parse, schedule, Schedule, ScheduleOptions, SyncPolicy};
use offload_sched::verify::verify;
use proptest::prelude::*;
use proptest::test_runner::Config;

/// The first step where `a` and `b` differ, for a failure message that is not a dump of
/// two whole schedules.
fn first_difference(a: &Schedule, b: &Schedule) -> String {
    if a.op_stream != b.op_stream {
        return "op_stream differs".into();
    }
    match a.steps.iter().zip(&b.steps).position(|(x, y)| x != y) {
        Some(k) => format!("step {k}: {:?} vs {:?}", a.steps[k], b.steps[k]),
        None if a.steps.len() != b.steps.len() => {
            format!("{} steps vs {}", a.steps.len(), b.steps.len())
        }
        None => format!("{a:?}\nvs\n{b:?}"),
    }
}

/// `s` reads back as `s` and prints the same again; it prints without an `issue order:`
/// line (the scheduler's steps follow the text's rule) when its ops are issued in id
/// order (the scheduler issues device work ahead of host ops it does not depend on, and
/// then the text says the order).
fn round_trip(g: &OpGraph, s: &Schedule, what: &str) {
    let text = s.to_string();
    let ops: Vec<u32> = (s.steps.iter())
        .filter_map(|st| match st {
            offload_sched::schedule::Step::Op(op) => Some(op.0),
            _ => None,
        })
        .collect();
    if ops.windows(2).all(|w| w[0] < w[1]) {
        assert!(
            !text.contains("\nissue order:"),
            "{what}: a scheduled program needs an issue order line\n{text}"
        );
    }
    let back = parse(&text, g).unwrap_or_else(|e| panic!("{what}: {e}\n{text}"));
    assert!(back == *s, "{what}: {}", first_difference(&back, s));
    assert_eq!(back.to_string(), text, "{what}");
}

fn options(policy: SyncPolicy, pool: u32, random_streams: Option<u64>) -> ScheduleOptions {
    ScheduleOptions {
        policy,
        streams_per_device: pool,
        random_streams,
        host_lanes: 1,
    }
}

#[test]
fn every_graph_reads_back_under_each_policy_pool_and_random_streams() {
    let mut checked = 0;
    for path in common::graph_files() {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let plan = common::plan(&name);
        let g = plan.graph();
        for policy in SyncPolicy::ALL {
            for (pool, random) in [(4, None), (1, None), (4, Some(1)), (3, Some(2))] {
                let s = schedule(g, &options(policy, pool, random));
                round_trip(
                    g,
                    &s,
                    &format!("{name} {policy} pool {pool} random {random:?}"),
                );
                checked += 1;
            }
        }
    }
    assert_eq!(checked, common::graph_files().len() * 12);
}

fn config() -> Config {
    programs::config()
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn random_programs_read_back(g in programs::gen(), seed in any::<u64>()) {
        let Ok(graph) = lower(&programs::build(&g)) else {
            return Ok(());
        };
        let pool = 1 + (seed % 4) as u32;
        for policy in SyncPolicy::ALL {
            for (pool, random) in [(4, None), (pool, Some(seed))] {
                let s = schedule(&graph, &options(policy, pool, random));
                round_trip(&graph, &s, &format!("{policy} pool {pool} random {random:?}"));
            }
        }
    }
}

/// Schedule texts to mutate, and their graphs: one and two devices, events, host waits on
/// streams, events and devices, per-op's `host wait` lines.
fn samples() -> Vec<(OpGraph, String)> {
    let mut out = Vec::new();
    for (name, policy) in [
        ("peer_two_devices.toml", SyncPolicy::Minimal),
        ("peer_two_devices.toml", SyncPolicy::PerOp),
        ("case_d04.toml", SyncPolicy::Minimal),
        ("case_e01.toml", SyncPolicy::PerRegion),
        ("fanout.toml", SyncPolicy::Minimal),
    ] {
        let plan = common::plan(name);
        let g = plan.graph().clone();
        let text = schedule(&g, &options(policy, 4, None)).to_string();
        out.push((g, text));
    }
    // A hand-made order too (so the `issue order:` line gets mutated): the first host
    // wait moved to the start.
    let (g, text) = &out[0];
    let mut s = parse(text, g).unwrap();
    let w = s.steps.iter().position(|st| st.is_host_wait()).unwrap();
    let wait = s.steps.remove(w);
    s.steps.insert(0, wait);
    let text = s.to_string();
    assert!(text.contains("\nissue order: host 1, "), "{text}");
    out.push((g.clone(), text));
    out
}

/// One random edit of a text.
#[derive(Clone, Debug)]
enum Edit {
    DropLine(usize),
    DoubleLine(usize),
    MoveLine(usize, usize),
    /// Replace the character at (position) with one of the text's alphabet.
    SetChar(usize, char),
    /// Insert a number at (position).
    InsertNumber(usize, u64),
    Truncate(usize),
}

fn edit() -> impl Strategy<Value = Edit> {
    let alphabet = prop::sample::select(vec![
        '0', '1', '2', '9', '#', 'e', 's', 'w', ' ', '\n', '(', ')', ':', ',', '"', '[', 'x', '\t',
        '\r', 'é',
    ]);
    prop_oneof![
        any::<usize>().prop_map(Edit::DropLine),
        any::<usize>().prop_map(Edit::DoubleLine),
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Edit::MoveLine(a, b)),
        (any::<usize>(), alphabet).prop_map(|(a, c)| Edit::SetChar(a, c)),
        (
            any::<usize>(),
            prop_oneof![0u64..20, Just(u32::MAX as u64), Just(u64::MAX)]
        )
            .prop_map(|(a, n)| Edit::InsertNumber(a, n)),
        any::<usize>().prop_map(Edit::Truncate),
    ]
}

fn i_mod(n: usize) -> impl Fn(usize) -> usize {
    move |i| i % n
}

fn apply(text: &str, e: &Edit) -> String {
    let mut lines: Vec<&str> = text.split_inclusive('\n').collect();
    let chars: Vec<char> = text.chars().collect();
    let n = lines.len().max(1);
    let at = i_mod(chars.len() + 1);
    match *e {
        Edit::DropLine(i) if !lines.is_empty() => {
            lines.remove(i % n);
        }
        Edit::DoubleLine(i) if !lines.is_empty() => lines.insert(i % n, lines[i % n]),
        Edit::MoveLine(a, b) if !lines.is_empty() => {
            let l = lines.remove(a % n);
            lines.insert(b % lines.len().max(1), l);
        }
        Edit::SetChar(i, c) if !chars.is_empty() => {
            let mut cs = chars;
            let i = i % cs.len();
            cs[i] = c;
            return cs.into_iter().collect();
        }
        Edit::InsertNumber(i, v) => {
            let mut cs = chars;
            let i = at(i);
            cs.splice(i..i, v.to_string().chars());
            return cs.into_iter().collect();
        }
        Edit::Truncate(i) => return chars[..at(i)].iter().collect(),
        _ => {}
    }
    lines.concat()
}

proptest! {
    #![proptest_config(Config { cases: config().cases * 4, ..config() })]

    #[test]
    fn parse_never_panics_on_garbage(text in "\\PC{0,300}", sample in 0usize..6) {
        let samples = samples();
        let (g, _) = &samples[sample];
        let _ = parse(&text, g);
        let _ = parse(&format!("schedule \"x\" policy=minimal streams=1 (pool 4 per device)\n{text}"), g);
    }

    #[test]
    fn mutated_texts_parse_or_fail_and_what_parses_reads_back(
        sample in 0usize..6,
        edits in prop::collection::vec(edit(), 1..4),
    ) {
        let samples = samples();
        let (g, text) = &samples[sample];
        let mut t = text.clone();
        for e in &edits {
            t = apply(&t, e);
        }
        match parse(&t, g) {
            Ok(s) => {
                // Whatever parses prints, reads back the same and can be verified.
                let again = s.to_string();
                let back = parse(&again, g).unwrap_or_else(|e| panic!("{e}\n{again}"));
                prop_assert!(back == s, "{}", first_difference(&back, &s));
                let _ = verify(g, &s);
            }
            Err(e) => {
                // The error's position is in the text.
                prop_assert!(e.line() >= 1 && e.line() <= t.split('\n').count().max(1), "{e}");
                let at = format!("{}:{}: ", e.line(), e.column());
                prop_assert!(e.to_string().starts_with(&at), "{}", e);
            }
        }
    }
}

/// The property tests above ran on something: generated programs that lower, and
/// mutated texts both accepted and refused. Runs them itself (the harness may order
/// tests any way), with a fixed number of cases.
#[test]
fn the_properties_are_not_vacuous() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let samples = samples();
    let (mut accepted, mut refused, mut changed) = (0, 0, 0);
    for _ in 0..400 {
        let sample = (0usize..6).new_tree(&mut runner).unwrap().current();
        let edits = prop::collection::vec(edit(), 1..4)
            .new_tree(&mut runner)
            .unwrap()
            .current();
        let (g, text) = &samples[sample];
        let mut t = text.clone();
        for e in &edits {
            t = apply(&t, e);
        }
        match parse(&t, g) {
            Ok(s) => {
                accepted += 1;
                if parse(text, g).unwrap() != s {
                    changed += 1;
                }
            }
            Err(_) => refused += 1,
        }
    }
    // Most edits break the text; some (a moved op line, a dropped wait with its count
    // fixed by chance, a doubled blank) keep it readable, some of those as a different
    // schedule.
    eprintln!("{accepted} accepted ({changed} changed), {refused} refused");
    assert!(refused > 200, "{accepted} accepted, {refused} refused");
    assert!(accepted > 10, "{accepted} accepted, {refused} refused");
    assert!(
        changed > 0,
        "{accepted} accepted ({changed} changed), {refused} refused"
    );
    let mut lowered = 0;
    let strategy = programs::gen();
    for _ in 0..20 {
        let g = strategy.new_tree(&mut runner).unwrap().current();
        if lower(&programs::build(&g)).is_ok() {
            lowered += 1;
        }
    }
    assert!(lowered >= 10, "{lowered} of 20 generated programs lower");
}
