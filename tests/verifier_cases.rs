//! Verifier cases as files (after Cranelift's filetests): every `tests/verifier/*.case`
//! names a graph, holds a schedule text (hand-edited from what `offload-sched schedule`
//! prints) and the violations `verify` must report, exactly and in order, or `none`.
//! tests/verifier/README.md gives the format. A malformed case fails the test naming
//! the file and line; every case is run and every failure reported, not only the first.

mod common;

use offload_sched::lower::OpGraph;
use offload_sched::schedule::{parse, ScheduleOptions};
use offload_sched::verify::{verify, Violation};
use offload_sched::Plan;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn cases_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/verifier")
}

/// A case file, read.
struct Case {
    /// The graph file (relative to the case file's folder).
    graph: PathBuf,
    /// The file's text with every line outside the schedule blanked, so the parser's
    /// line numbers are the file's.
    schedule: String,
    /// The violations expected, in order, with their lines; empty for `none`.
    violations: Vec<(usize, String)>,
}

/// Reads a case file; `Err((line, message))` when it is malformed.
fn read_case(text: &str) -> Result<Case, (usize, String)> {
    #[derive(PartialEq)]
    enum At {
        Head,
        Schedule,
        Tail,
        Violations,
    }
    let mut at = At::Head;
    let mut graph = None;
    let mut schedule = Vec::new();
    let mut violations = Vec::new();
    let mut none = false;
    let mut seen_violations = false;
    for (i, line) in text.lines().enumerate() {
        let no = i + 1;
        let comment = line.starts_with(';') || line.trim().is_empty();
        match at {
            At::Head if comment => {}
            At::Head => {
                if let Some(path) = line.strip_prefix("graph:") {
                    if graph.is_some() {
                        return Err((no, "a second `graph:` line".into()));
                    }
                    graph = Some(PathBuf::from(path.trim()));
                } else if line.starts_with("schedule \"") {
                    at = At::Schedule;
                } else {
                    return Err((
                        no,
                        format!(
                            "expected `; comment`, `graph: PATH` or the schedule's first line \
                             (`schedule \"NAME\" ...`), found `{line}`"
                        ),
                    ));
                }
            }
            At::Schedule | At::Tail | At::Violations => {}
        }
        if at == At::Schedule {
            schedule.push(line);
            if line.starts_with("summary:") {
                at = At::Tail;
            }
            continue;
        }
        schedule.push("");
        match at {
            At::Tail | At::Violations if comment => {}
            At::Tail => match line.strip_prefix("violations:").map(str::trim) {
                Some("none") => {
                    none = true;
                    seen_violations = true;
                    at = At::Violations;
                }
                Some("") => {
                    seen_violations = true;
                    at = At::Violations;
                }
                _ => {
                    return Err((
                        no,
                        format!(
                            "expected `violations:` (then one indented line each) or \
                             `violations: none`, found `{line}`"
                        ),
                    ))
                }
            },
            At::Violations if line.starts_with([' ', '\t']) && !none => {
                violations.push((no, line.trim().to_string()));
            }
            At::Violations => {
                return Err((
                    no,
                    format!(
                        "expected an indented violation line{}, found `{line}`",
                        if none { " (none: no more lines)" } else { "" }
                    ),
                ))
            }
            At::Head | At::Schedule => {}
        }
    }
    let last = text.lines().count().max(1);
    let graph = graph.ok_or((1, "no `graph: PATH` line before the schedule".to_string()))?;
    if at == At::Head || at == At::Schedule {
        return Err((
            last,
            "the schedule (`schedule \"NAME\" ...` to `summary: ...`) is missing or unfinished"
                .into(),
        ));
    }
    if !seen_violations {
        return Err((last, "no `violations:` section after the schedule".into()));
    }
    if !none && violations.is_empty() {
        return Err((
            last,
            "`violations:` lists nothing (write `violations: none`)".into(),
        ));
    }
    Ok(Case {
        graph,
        schedule: schedule.join("\n"),
        violations,
    })
}

/// The op graph of `path`, lowered once per file.
fn graph<'a>(
    cache: &'a mut BTreeMap<PathBuf, OpGraph>,
    path: &Path,
) -> Result<&'a OpGraph, String> {
    if !cache.contains_key(path) {
        let plan = Plan::from_file(path, &ScheduleOptions::default())
            .map_err(|e| format!("{}: {}", path.display(), e.render()))?;
        cache.insert(path.to_path_buf(), plan.graph().clone());
    }
    Ok(&cache[path])
}

/// Runs one case; `Err` says what is wrong, starting with `FILE:LINE:`.
fn run_case(file: &Path, cache: &mut BTreeMap<PathBuf, OpGraph>) -> Result<Vec<Violation>, String> {
    let shown = file
        .strip_prefix(env!("CARGO_MANIFEST_DIR"))
        .unwrap_or(file)
        .display()
        .to_string();
    let text = std::fs::read_to_string(file).map_err(|e| format!("{shown}: {e}"))?;
    let case = read_case(&text).map_err(|(line, m)| format!("{shown}:{line}: {m}"))?;
    let g = graph(cache, &file.parent().unwrap().join(&case.graph))
        .map_err(|e| format!("{shown}: graph: {e}"))?;
    let sched = parse(&case.schedule, g).map_err(|e| format!("{shown}:{e}"))?;
    // The case's text reads back from what it parses to.
    let again = sched.to_string();
    if parse(&again, g).as_ref() != Ok(&sched) {
        return Err(format!(
            "{shown}: the parsed schedule does not read back:\n{again}"
        ));
    }
    let found: Vec<Violation> = match verify(g, &sched) {
        Ok(_) => Vec::new(),
        Err(e) => e.violations,
    };
    let found_text: Vec<String> = found.iter().map(|v| v.to_string()).collect();
    let want: Vec<&str> = case.violations.iter().map(|(_, v)| v.as_str()).collect();
    if found_text != want {
        let at = case
            .violations
            .iter()
            .zip(&found_text)
            .find(|((_, w), f)| w != *f)
            .map_or(case.violations.last().map_or(1, |v| v.0), |((l, _), _)| *l);
        let listed = if found_text.is_empty() {
            "violations: none".to_string()
        } else {
            format!(
                "violations:\n{}",
                found_text
                    .iter()
                    .map(|v| format!("  {v}\n"))
                    .collect::<String>()
            )
        };
        return Err(format!(
            "{shown}:{at}: the verifier reports {} violation(s), the case expects {}; \
             it reports:\n{listed}",
            found_text.len(),
            want.len()
        ));
    }
    Ok(found)
}

#[test]
fn every_verifier_case_reports_exactly_its_violations() {
    let mut files: Vec<PathBuf> = std::fs::read_dir(cases_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "case"))
        .collect();
    files.sort();
    let mut cache = BTreeMap::new();
    let mut failures = Vec::new();
    // Which violation kinds the cases cover, and how many verify clean.
    let mut kinds: BTreeMap<&'static str, usize> = BTreeMap::new();
    let mut clean = 0;
    for file in &files {
        match run_case(file, &mut cache) {
            Ok(found) if found.is_empty() => clean += 1,
            Ok(found) => {
                for v in &found {
                    *kinds.entry(kind(v)).or_default() += 1;
                }
            }
            Err(e) => failures.push(e),
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} verifier cases failed:\n\n{}",
        failures.len(),
        files.len(),
        failures.join("\n\n")
    );
    assert!(files.len() >= 8, "only {} cases", files.len());
    assert_eq!(
        kinds.keys().copied().collect::<Vec<_>>(),
        [
            "BadEvent",
            "BadIssue",
            "CoarseHostWait",
            "RegionSplit",
            "Unnecessary",
            "Unordered"
        ],
        "every violation kind has a case"
    );
    assert!(clean >= 2, "{clean} cases verify clean");
}

fn kind(v: &Violation) -> &'static str {
    match v {
        Violation::Unordered { .. } => "Unordered",
        Violation::BadIssue { .. } => "BadIssue",
        Violation::BadEvent { .. } => "BadEvent",
        Violation::RegionSplit { .. } => "RegionSplit",
        Violation::Unnecessary { .. } => "Unnecessary",
        Violation::CoarseHostWait { .. } => "CoarseHostWait",
        // Only `check_order` reports races, and only on graphs the lowering did not make
        // (a graph file always has the edges): tests/exec_safety.rs covers them.
        Violation::Race { .. } => "Race",
        _ => "other",
    }
}

/// The case reader refuses malformed files with their line.
#[test]
fn malformed_case_files_name_their_line() {
    let ok_schedule = "schedule \"x\" policy=minimal streams=0 (pool 4 per device)\nsummary: 0 ops, 0 streams, 0 events, 0 host waits\n";
    for (text, line, start) in [
        ("graph: a.toml\nbogus\n", 2, "expected `; comment`"),
        (
            &format!("{ok_schedule}violations: none\n") as &str,
            1,
            "no `graph: PATH`",
        ),
        (
            &format!("graph: a.toml\n{ok_schedule}"),
            3,
            "no `violations:`",
        ),
        (
            &format!("graph: a.toml\n{ok_schedule}violations:\n"),
            4,
            "`violations:` lists nothing",
        ),
        (
            &format!("graph: a.toml\n{ok_schedule}\nviolations: none\n  x\n"),
            6,
            "expected an indented violation line (none",
        ),
        (
            &format!("graph: a.toml\n{ok_schedule}oops\n"),
            4,
            "expected `violations:`",
        ),
        (
            "graph: a.toml\nschedule \"x\" policy=minimal\n",
            2,
            "the schedule",
        ),
    ] {
        match read_case(text) {
            Ok(_) => panic!("accepted:\n{text}"),
            Err((l, m)) => assert!(l == line && m.starts_with(start), "{l}: {m}\n{text}"),
        }
    }
    // A schedule error is located in the file: line 4 is the s0 block's header.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bad.case");
    let graph = common::graph_path("saxpy.toml");
    std::fs::write(
        &file,
        format!(
            "; saxpy with a stream of another device\ngraph: {}\nschedule \"saxpy\" policy=minimal streams=1 (pool 4 per device)\ns0 (device 1):\nsummary: 9 ops, 1 stream, 0 events, 0 host waits\nviolations: none\n",
            graph.display()
        ),
    )
    .unwrap();
    let e = run_case(&file, &mut BTreeMap::new()).unwrap_err();
    assert!(
        e.ends_with("bad.case:4:12: stream s0 is of device 0 (pool 4 per device), not 1"),
        "{e}"
    );
}
