//! Task Bench's dependence patterns ([`offload_sched::model::taskbench`]) against its
//! definition: edge sets written out by hand from `core/core.cc` for a few graphs, every
//! pattern against Task Bench's own display of its graphs (`tests/data/taskbench/*.txt`,
//! written by Task Bench's code through `gen.sh`), dependencies mirrored by reverse
//! dependencies over many sizes, the built programs' regions and maps, and the spec
//! errors.

use offload_sched::lower::{lower_with, LowerOptions, OpId, OpKind};
use offload_sched::model::taskbench::{
    dependencies, dependency_intervals, points, reverse_dependencies,
};
use offload_sched::model::{
    taskbench_program, Construct, TaskBenchError, TaskBenchKernel, TaskBenchParams,
    TaskBenchPattern, TaskBenchSpec,
};
use std::collections::{BTreeMap, BTreeSet};
use TaskBenchPattern::*;

fn spec(pattern: TaskBenchPattern, width: usize, steps: usize) -> TaskBenchSpec {
    with(pattern, width, steps, |_| {})
}

fn with(
    pattern: TaskBenchPattern,
    width: usize,
    steps: usize,
    f: impl FnOnce(&mut TaskBenchParams),
) -> TaskBenchSpec {
    let mut p = TaskBenchParams {
        pattern,
        width,
        steps,
        ..TaskBenchParams::default()
    };
    f(&mut p);
    TaskBenchSpec::new(p).unwrap_or_else(|e| panic!("{pattern} w{width} s{steps}: {e}"))
}

/// Every edge `(t − 1, q) → (t, p)` as `(t, q, p)`.
fn edges(s: &TaskBenchSpec) -> BTreeSet<(usize, usize, usize)> {
    (0..s.steps())
        .flat_map(|t| points(s, t).map(move |p| (t, p)))
        .flat_map(|(t, p)| dependencies(s, t, p).into_iter().map(move |q| (t, q, p)))
        .collect()
}

/// The same edges from the reverse dependencies.
fn reverse_edges(s: &TaskBenchSpec) -> BTreeSet<(usize, usize, usize)> {
    (0..s.steps())
        .flat_map(|t| points(s, t).map(move |q| (t, q)))
        .flat_map(|(t, q)| {
            reverse_dependencies(s, t, q)
                .into_iter()
                .map(move |p| (t + 1, q, p))
        })
        .collect()
}

/// Per timestep from 1, per point of it, its dependencies (the hand-written tables).
fn table(s: &TaskBenchSpec) -> Vec<Vec<(usize, Vec<usize>)>> {
    (1..s.steps())
        .map(|t| points(s, t).map(|p| (p, dependencies(s, t, p))).collect())
        .collect()
}

#[test]
fn stencil_1d_by_hand() {
    let s = spec(Stencil1d, 4, 3);
    let row = vec![
        (0, vec![0, 1]),
        (1, vec![0, 1, 2]),
        (2, vec![1, 2, 3]),
        (3, vec![2, 3]),
    ];
    assert_eq!(table(&s), vec![row.clone(), row]);
    assert_eq!(dependencies(&s, 0, 2), Vec::<usize>::new());
    assert_eq!(edges(&s).len(), 2 * 10);
    assert_eq!(edges(&s), reverse_edges(&s));
}

#[test]
fn stencil_1d_periodic_wraps_by_hand() {
    let s = spec(Stencil1dPeriodic, 5, 2);
    assert_eq!(
        table(&s),
        vec![vec![
            (0, vec![0, 1, 4]),
            (1, vec![0, 1, 2]),
            (2, vec![1, 2, 3]),
            (3, vec![2, 3, 4]),
            (4, vec![0, 3, 4]),
        ]]
    );
    assert_eq!(dependency_intervals(&s, 1, 0), vec![(0, 1), (4, 4)]);
    assert_eq!(dependency_intervals(&s, 1, 4), vec![(3, 4), (0, 0)]);
}

#[test]
fn dom_band_slides_by_hand() {
    // offset max(0, t + 4 − 6), width min(4, t + 1, 6 − t); (t, p) reads p − 1 ..= p.
    let s = spec(Dom, 4, 6);
    let pts: Vec<_> = (0..6).map(|t| points(&s, t)).collect();
    assert_eq!(pts, [0..1, 0..2, 0..3, 1..4, 2..4, 3..4]);
    assert_eq!(
        table(&s),
        vec![
            vec![(0, vec![0]), (1, vec![0])],
            vec![(0, vec![0]), (1, vec![0, 1]), (2, vec![1])],
            vec![(1, vec![0, 1]), (2, vec![1, 2]), (3, vec![2])],
            vec![(2, vec![1, 2]), (3, vec![2, 3])],
            vec![(3, vec![2, 3])],
        ]
    );
    assert_eq!(s.tasks(), 1 + 2 + 3 + 3 + 2 + 1);
    // Not a task: no dependencies.
    assert_eq!(dependencies(&s, 5, 0), Vec::<usize>::new());
    assert_eq!(reverse_dependencies(&s, 2, 0), vec![1]);
}

#[test]
fn tree_doubles_by_hand() {
    let s = spec(Tree, 6, 4);
    assert_eq!(
        table(&s),
        vec![
            vec![(0, vec![0]), (1, vec![0])],
            vec![(0, vec![0]), (1, vec![0]), (2, vec![1]), (3, vec![1])],
            (0..6).map(|p| (p, vec![p / 2])).collect(),
        ]
    );
    assert_eq!(reverse_dependencies(&s, 2, 1), vec![2, 3]);
    assert_eq!(reverse_dependencies(&s, 2, 3), Vec::<usize>::new());
}

#[test]
fn fft_butterflies_by_hand() {
    // ⌈log2 8⌉ = 3 dependence sets; timestep t uses d = (t + 2) mod 3: p − 2ᵈ, p, p + 2ᵈ.
    let s = spec(Fft, 8, 5);
    let t = table(&s);
    assert_eq!(t[0][0], (0, vec![0, 1]));
    assert_eq!(t[0][7], (7, vec![6, 7]));
    assert_eq!(t[1][2], (2, vec![0, 2, 4]));
    assert_eq!(t[1][7], (7, vec![5, 7]));
    assert_eq!(t[2][3], (3, vec![3, 7]));
    assert_eq!(t[2][4], (4, vec![0, 4]));
    assert_eq!(t[3][4], (4, vec![3, 4, 5])); // back to d = 0
}

#[test]
fn spread_by_hand() {
    // radix 3, width 8: offsets i·8/3 = 0, 2, 5, plus t mod 3 for i > 0.
    let s = with(Spread, 8, 4, |p| p.period = Some(3));
    let t = table(&s);
    assert_eq!(t[0][0], (0, vec![0, 3, 6]));
    assert_eq!(t[0][5], (5, vec![0, 3, 5]));
    assert_eq!(t[1][1], (1, vec![0, 1, 5]));
    assert_eq!(t[2][0], (0, vec![0, 2, 5]));
    assert_eq!(dependency_intervals(&s, 1, 5), vec![(5, 5), (0, 0), (3, 3)]);
}

#[test]
fn the_rest_by_hand() {
    assert!(edges(&spec(Trivial, 4, 4)).is_empty());
    let no_comm = spec(NoComm, 4, 3);
    assert_eq!(
        edges(&no_comm),
        (1..3)
            .flat_map(|t| (0..4).map(move |p| (t, p, p)))
            .collect()
    );
    let all = spec(AllToAll, 4, 2);
    assert_eq!(table(&all)[0][2], (2, vec![0, 1, 2, 3]));
    assert_eq!(dependency_intervals(&all, 1, 2), vec![(0, 3)]);
    // nearest: p − radix/2 ..= p + (radix − 1)/2.
    let near = |radix| with(Nearest, 7, 2, |p| p.radix = radix);
    assert_eq!(dependencies(&near(4), 1, 3), vec![1, 2, 3, 4]);
    assert_eq!(dependencies(&near(3), 1, 0), vec![0, 1]);
    assert!(edges(&near(0)).is_empty());
    // random_nearest keeps the task's own point whatever the fraction.
    let rn = with(RandomNearest, 8, 4, |p| p.fraction_connected = 0.0);
    assert_eq!(
        edges(&rn),
        (1..4)
            .flat_map(|t| (0..8).map(move |p| (t, p, p)))
            .collect()
    );
    let full = with(RandomNearest, 8, 2, |p| p.fraction_connected = 1.0);
    assert_eq!(dependencies(&full, 1, 4), vec![3, 4, 5]);
}

/// Points; dependencies per point; reverse dependencies per point of the step before.
type ShownStep = (
    Vec<usize>,
    Vec<(usize, Vec<usize>)>,
    Vec<(usize, Vec<usize>)>,
);

/// One Task Bench graph's display: per timestep, its points, each point's dependencies
/// and (for the points of the timestep before) reverse dependencies.
#[derive(Default, Debug)]
struct Shown {
    steps: Vec<ShownStep>,
}

fn nums(s: &str) -> Vec<usize> {
    let mut v: Vec<usize> = s.split_whitespace().map(|n| n.parse().unwrap()).collect();
    v.sort_unstable();
    v
}

/// Parses `gen.sh`'s dump: the flags line, then `App::display` with `-vv`.
fn parse_dump(text: &str) -> (String, Vec<Shown>) {
    let mut lines = text.lines();
    let flags = lines.next().unwrap().to_string();
    let mut graphs: Vec<Shown> = Vec::new();
    let mut reverse = false;
    for l in lines {
        let l = l.trim();
        if l.starts_with("Task Graph ") {
            graphs.push(Shown::default());
        } else if l.starts_with("Timestep ") {
            let g = graphs.last_mut().unwrap();
            g.steps.push(Default::default());
            reverse = false;
        } else if let Some(p) = l.strip_prefix("Points:") {
            graphs.last_mut().unwrap().steps.last_mut().unwrap().0 = nums(p);
        } else if l == "Reverse Dependencies:" {
            reverse = true;
        } else if let Some(rest) = l.strip_prefix("Point ") {
            let (p, deps) = rest.split_once(':').unwrap();
            let entry = (p.parse().unwrap(), nums(deps));
            let step = graphs.last_mut().unwrap().steps.last_mut().unwrap();
            if reverse {
                step.2.push(entry);
            } else {
                step.1.push(entry);
            }
        }
    }
    (flags, graphs)
}

/// The specs of Task Bench flags (`-and` separates graphs; graph `i` has index `i`).
fn specs_of(flags: &str) -> Vec<TaskBenchSpec> {
    flags
        .split(" -and ")
        .enumerate()
        .map(|(i, one)| {
            let mut p = TaskBenchParams {
                graph_index: i as u64,
                ..TaskBenchParams::default()
            };
            let words: Vec<&str> = one.split_whitespace().collect();
            for w in words.chunks(2) {
                let v = w[1];
                match w[0] {
                    "-type" => p.pattern = v.parse().unwrap(),
                    "-width" => p.width = v.parse().unwrap(),
                    "-steps" => p.steps = v.parse().unwrap(),
                    "-radix" => p.radix = v.parse().unwrap(),
                    "-period" => p.period = Some(v.parse().unwrap()),
                    "-fraction" => p.fraction_connected = v.parse().unwrap(),
                    f => panic!("flag {f}"),
                }
            }
            TaskBenchSpec::new(p).unwrap()
        })
        .collect()
}

#[test]
fn every_pattern_matches_task_bench_s_own_display() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/taskbench");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "txt"))
        .collect();
    files.sort();
    let mut seen = BTreeSet::new();
    for path in &files {
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        let (flags, graphs) = parse_dump(&std::fs::read_to_string(path).unwrap());
        let specs = specs_of(&flags);
        assert_eq!(specs.len(), graphs.len(), "{name}");
        for (s, g) in specs.iter().zip(&graphs) {
            seen.insert(s.pattern());
            assert_eq!(g.steps.len(), s.steps(), "{name}");
            for (t, (pts, deps, rdeps)) in g.steps.iter().enumerate() {
                let ours: Vec<usize> = points(s, t).collect();
                assert_eq!(&ours, pts, "{name} timestep {t} points");
                let ours: Vec<_> = points(s, t).map(|p| (p, dependencies(s, t, p))).collect();
                assert_eq!(&ours, deps, "{name} timestep {t} dependencies");
                if t > 0 {
                    let ours: Vec<_> = points(s, t - 1)
                        .map(|q| (q, reverse_dependencies(s, t - 1, q)))
                        .collect();
                    assert_eq!(&ours, rdeps, "{name} timestep {t} reverse dependencies");
                }
            }
        }
    }
    assert_eq!(
        seen.len(),
        TaskBenchPattern::ALL.len(),
        "a dump per pattern"
    );
}

#[test]
fn reverse_dependencies_mirror_dependencies_at_many_sizes() {
    let mut checked = 0;
    for pattern in TaskBenchPattern::ALL {
        for width in 1..=9 {
            for steps in 1..=6 {
                for radix in 0..=5 {
                    for period in [None, Some(1), Some(2)] {
                        let p = TaskBenchParams {
                            pattern,
                            width,
                            steps,
                            radix,
                            period: period.filter(|_| pattern.needs_period()),
                            fraction_connected: 0.5,
                            ..TaskBenchParams::default()
                        };
                        let Ok(s) = TaskBenchSpec::new(p) else {
                            continue;
                        };
                        assert_eq!(edges(&s), reverse_edges(&s), "{p:?}");
                        for t in 0..steps {
                            for q in points(&s, t) {
                                let d = dependencies(&s, t, q);
                                assert!(d.windows(2).all(|w| w[0] < w[1]), "{p:?}");
                                if t > 0 {
                                    assert!(d.iter().all(|x| points(&s, t - 1).contains(x)));
                                }
                            }
                        }
                        assert_eq!(reverse_dependencies(&s, steps - 1, 0), Vec::<usize>::new());
                        checked += 1;
                    }
                }
            }
        }
    }
    assert!(checked > 2000, "{checked} specs");
}

#[test]
fn programs_map_each_dependency_interval_and_their_own_output() {
    let s = with(Stencil1dPeriodic, 5, 3, |p| p.output_bytes = 32);
    let prog = taskbench_program(&s).unwrap();
    let regions: Vec<_> = prog
        .body
        .iter()
        .filter_map(|c| match c {
            Construct::Target(r) => Some(r),
            _ => None,
        })
        .collect();
    assert_eq!(regions.len(), 15);
    let r = regions.iter().find(|r| r.name == "t2_p0").unwrap();
    assert_eq!(r.kernel, "taskbench_empty_2");
    assert!(r.nowait);
    let maps: Vec<String> = r
        .maps
        .iter()
        .map(|m| format!("{} {}", m.map_type.name(), m.section.display(&prog.buffers)))
        .collect();
    // 32 bytes = 4 i64 per output; field 2 written, field 1 read at points 0..=1 and 4.
    assert_eq!(
        maps,
        ["from field2[0:4]", "to field1[0:8]", "to field1[16:4]"]
    );
    assert_eq!(r.depends.len(), 3);
    let names: Vec<_> = prog.kernels.iter().map(|k| k.name.as_str()).collect();
    // Timestep 0 has no inputs, interior points one interval, the two ends two.
    assert_eq!(
        names,
        [
            "taskbench_empty_0",
            "taskbench_empty_1",
            "taskbench_empty_2"
        ]
    );
    assert!(prog
        .body
        .iter()
        .any(|c| matches!(c, Construct::Taskwait { .. })));
    // Host tasks: no regions.
    let h = with(Stencil1d, 4, 3, |p| p.host_tasks = true);
    let prog = taskbench_program(&h).unwrap();
    assert!(prog.body.iter().all(|c| !matches!(c, Construct::Target(_))));
    assert_eq!(prog.body.len(), 12 + 1);
}

#[test]
fn flops_and_bytes_are_task_bench_s_counts() {
    let s = with(Dom, 4, 6, |p| {
        p.kernel = TaskBenchKernel::ComputeBound { iterations: 1000 }
    });
    assert_eq!(s.flops_per_task(), 2 * 64 * 1000 + 64);
    assert_eq!(s.total_flops(), 12.0 * 128_064.0);
    assert_eq!(s.total_bytes(), 0.0);
    let m = with(Stencil1d, 4, 2, |p| {
        p.kernel = TaskBenchKernel::MemoryBound {
            iterations: 8,
            scratch_bytes: 4096,
        }
    });
    assert_eq!(m.bytes_per_task(), 4096 * 8 / 16);
    assert_eq!(m.total_bytes(), 8.0 * 2048.0);
    assert_eq!(m.total_flops(), 0.0);
}

fn refused(f: impl FnOnce(&mut TaskBenchParams)) -> String {
    let mut p = TaskBenchParams::default();
    f(&mut p);
    match TaskBenchSpec::new(p) {
        Err(TaskBenchError::Spec(m)) => m,
        other => panic!("{p:?} gave {other:?}"),
    }
}

#[test]
fn bad_specs_are_errors_naming_the_rule() {
    assert_eq!(refused(|p| p.width = 0), "width 0: must be at least 1");
    assert_eq!(refused(|p| p.steps = 0), "steps 0: must be at least 1");
    assert_eq!(
        refused(|p| p.fraction_connected = 1.5),
        "fraction_connected 1.5: must be in [0, 1]"
    );
    assert_eq!(
        refused(|p| p.period = Some(2)),
        "pattern trivial takes no period (period 2: only spread and random_nearest have one)"
    );
    assert_eq!(
        refused(|p| {
            p.pattern = Spread;
            p.period = Some(0)
        }),
        "pattern spread needs a period of at least 1 (period 0)"
    );
    assert_eq!(
        refused(|p| {
            p.pattern = Spread;
            p.radix = 0
        }),
        "pattern spread needs radix at least 1 (radix 0)"
    );
    // Task Bench's default period 3 exceeds ⌈4 / 3⌉ = 2.
    assert!(refused(|p| p.pattern = Spread).starts_with("pattern spread: period 3 exceeds"));
    // radix > width: a point twice.
    assert_eq!(
        refused(|p| {
            p.pattern = Spread;
            p.radix = 5;
            p.period = Some(1)
        }),
        "pattern spread at width 4: point 0 depends on point 0 twice (dependence set 0)"
    );
    assert_eq!(
        refused(|p| {
            p.pattern = Stencil1dPeriodic;
            p.width = 2
        }),
        "pattern stencil_1d_periodic at width 2: point 0 depends on point 1 twice (dependence set 0)"
    );
    assert!(refused(|p| {
        p.pattern = Fft;
        p.width = 1
    })
    .starts_with("pattern fft needs width at least 2"));
    for bytes in [0, 8, 24] {
        assert!(refused(|p| p.output_bytes = bytes).starts_with(&format!("output_bytes {bytes}:")));
    }
    assert!(refused(|p| {
        p.kernel = TaskBenchKernel::MemoryBound {
            iterations: 1,
            scratch_bytes: 100,
        }
    })
    .starts_with("kernel memory_bound: scratch_bytes 100 must be a positive multiple of 256"));
    assert!(refused(|p| p.fields = Some(1)).starts_with("fields 1: at least 2"));
    assert!(refused(|p| {
        p.kernel = TaskBenchKernel::ComputeBound {
            iterations: 1 << 53,
        }
    })
    .contains("must be below 2⁵³"));
    // Names: Task Bench's, round trip; an unknown one lists them.
    for p in TaskBenchPattern::ALL {
        assert_eq!(p.name().parse::<TaskBenchPattern>(), Ok(p));
    }
    assert_eq!(
        "stencil"
            .parse::<TaskBenchPattern>()
            .unwrap_err()
            .to_string(),
        "Task Bench spec: unknown Task Bench pattern `stencil` (patterns: trivial, no_comm, \
         stencil_1d, stencil_1d_periodic, dom, tree, fft, all_to_all, nearest, spread, \
         random_nearest)"
    );
    // A single timestep needs no second field.
    assert!(TaskBenchSpec::new(TaskBenchParams {
        steps: 1,
        fields: Some(1),
        ..TaskBenchParams::default()
    })
    .is_ok());
}

/// The orders between tasks `(t, p)` the lowered program makes, against Task Bench's
/// graph: `.0` the pairs `(a, b)` where `a`'s kernel precedes `b`'s (a path of op-graph
/// edges) but `a` is not among `b`'s transitive dependencies (extras: with one field per
/// timestep, the default, and the empty kernel, the dependencies are the programs' only
/// data dependences), `.1` the dependencies `(a, b)` with no such path (missing).
type Orders = (
    Vec<((usize, usize), (usize, usize))>,
    Vec<((usize, usize), (usize, usize))>,
);

fn task_orders(s: &TaskBenchSpec, opts: &LowerOptions) -> Orders {
    let g = lower_with(&taskbench_program(s).unwrap(), opts).unwrap();
    let task = |name: &str| -> Option<(usize, usize)> {
        let (t, p) = name.strip_prefix('t')?.split_once("_p")?;
        Some((t.parse().ok()?, p.parse().ok()?))
    };
    // Per op, the tasks whose kernel is it or reaches it (ops are in topological order).
    let mut reach: Vec<BTreeSet<(usize, usize)>> = Vec::with_capacity(g.ops.len());
    let mut kernels = BTreeMap::new();
    for (i, op) in g.ops.iter().enumerate() {
        let mut r = BTreeSet::new();
        for p in g.preds(OpId(i as u32)) {
            r.extend(reach[p.index()].iter().copied());
        }
        let region = &g.regions[op.region.index()].name;
        if let (OpKind::Kernel(_), Some(k)) = (&op.kind, task(region)) {
            kernels.insert(k, i);
            r.insert(k);
        }
        reach.push(r);
    }
    let (mut extras, mut missing) = (Vec::new(), Vec::new());
    for (&(t, p), &k) in &kernels {
        let mut anc = BTreeSet::new();
        let mut front = vec![(t, p)];
        while let Some((tt, pp)) = front.pop() {
            if tt == 0 {
                continue;
            }
            for q in dependencies(s, tt, pp) {
                if anc.insert((tt - 1, q)) {
                    front.push((tt - 1, q));
                }
            }
        }
        for &a in &reach[k] {
            if a != (t, p) && !anc.contains(&a) {
                extras.push((a, (t, p)));
            }
        }
        if t > 0 {
            for q in dependencies(s, t, p) {
                if !reach[k].contains(&(t - 1, q)) {
                    missing.push(((t - 1, q), (t, p)));
                }
            }
        }
    }
    assert_eq!(
        kernels.len() as u64,
        s.tasks(),
        "{}: a kernel per task",
        s.name()
    );
    (extras, missing)
}

/// Issue 30's finding: with elision, a deferred D2H written back at the start of a task
/// took that task's `depend` predecessors, so every later reader of those bytes followed
/// them too (stencil_1d_periodic width 6: task (1, 1) after (0, 5)). Every pattern, with
/// and without elision, without a cap and under one that makes the lowering evict kept
/// copies: no task follows one it does not depend on, and every dependency is an order.
#[test]
fn the_lowering_orders_tasks_only_by_their_dependencies() {
    let mut checked = 0;
    for pattern in TaskBenchPattern::ALL {
        for width in [4, 6] {
            let s = with(pattern, width, 5, |p| {
                p.period = matches!(pattern, Spread | RandomNearest).then_some(2);
                p.radix = 2;
                p.fraction_connected = 0.5;
            });
            let field = (width as u64) * s.output_bytes();
            let capped = LowerOptions {
                device_memory: Some(2 * field + 16),
                ..LowerOptions::elided()
            };
            for (what, opts) in [
                ("elided", LowerOptions::elided()),
                ("elided, capped", capped),
                ("no elision", LowerOptions::no_elide()),
            ] {
                let capped_run = opts.device_memory.is_some();
                let (extras, missing) = task_orders(&s, &opts);
                assert!(
                    missing.is_empty(),
                    "{} ({what}): unordered {missing:?}",
                    s.name()
                );
                if capped_run {
                    // The cap's memory edges (an `Alloc` after the `Free` whose room it
                    // takes) are orders no data dependence asks for, but the cap needs.
                    checked += 1;
                    continue;
                }
                assert!(
                    extras.is_empty(),
                    "{} ({what}): {} extra orders, first (task before task): {:?}",
                    s.name(),
                    extras.len(),
                    &extras[..extras.len().min(5)]
                );
                checked += 1;
            }
        }
    }
    assert_eq!(checked, 11 * 2 * 3);
}
