//! [`taskbench_program`]: a Task Bench graph as a program, and [`check_outputs`].

use super::kernel::{self, CUDA_THREADS, SCRATCH_MAGIC};
use super::spec::{TaskBenchError, TaskBenchKernel, TaskBenchSpec};
use super::{dependency_intervals, points};
use crate::exec::Buffers;
use crate::model::{
    Arg, BufferId, DependType, ElemType, Init, MapType, Program, ProgramBuilder, Section,
};
use std::collections::BTreeSet;

/// A task: timestep, point, dependency intervals.
type Task = (usize, usize, Vec<(usize, usize)>);

/// The name of output field `f`'s buffer: `field{f}`.
pub fn field_name(f: usize) -> String {
    format!("field{f}")
}

/// Builds the program of `spec`.
///
/// Buffers: `field{f}` for `f < spec.fields()` ([`field_name`]), `i64`, zeros, `width ·
/// output_bytes / 8` elements: point `p`'s output in field `f` is the section
/// `[p · output_bytes / 8, +output_bytes / 8)`; task `(t, p)` writes field `t mod fields`.
/// With the memory-bound kernel, `scratch{p}` per point, `scratch_bytes / 8` `i64`, every
/// word [`SCRATCH_MAGIC`] (Task Bench's `prepare_scratch`); the tasks of one point share
/// it (Task Bench's scratch per point), so they are ordered by it.
///
/// Tasks, timestep by timestep, point by point ([`points`]): task `(t, p)` is
///
/// ```text
/// #pragma omp target nowait  map(from: out) depend(inout: out)
///         map(to: in_k) depend(in: in_k)        for each dependency interval k
///         [map(tofrom: scratch{p}) depend(inout: scratch{p})]   memory-bound
///   taskbench_<kind>_<n>(t, p, out, in_0, first_0, …, [iterations], [scratch{p}])
/// ```
///
/// named `t{t}_p{p}`, launched as one team of 64 threads, where `out` is its output
/// section and `in_k` the outputs of the points `first_k ..= last_k` of
/// [`dependency_intervals`] in field `(t − 1) mod fields` (one section per interval, so
/// `n` inputs); then one `taskwait`. The scratch buffers are entered once before the first
/// task (`target enter data map(to:)`, so tasks copy nothing for them) and released after
/// the `taskwait`. The kernels (module `kernel`'s docs) are registered in the program, one
/// per input count used, with host code and CUDA C.
///
/// With `spec.entered()` (target regions), every field is entered before the first task
/// (`target enter data map(to: field{f})`, named `fields_enter`) and copied back after
/// the `taskwait` (`target exit data map(from: field{f})`, `fields_exit`): the tasks'
/// maps then find their sections present and copy nothing.
///
/// With `spec.host_tasks()`, each task is instead a host task (`host_kernel`) running the
/// same kernel on the host buffers: no copies, no target regions.
///
/// Errors: [`TaskBenchError::Spec`] when a buffer's length overflows `u64` elements.
///
/// Complexity: `O(T · D)` for `T` tasks and `D` dependency intervals per task.
pub fn taskbench_program(spec: &TaskBenchSpec) -> Result<Program, TaskBenchError> {
    let words = spec.output_bytes() / 8;
    let field_len = words.checked_mul(spec.width() as u64).ok_or_else(|| {
        TaskBenchError::Spec(format!(
            "width {} × output_bytes {} overflows a buffer",
            spec.width(),
            spec.output_bytes()
        ))
    })?;
    let kind = spec.kernel();
    let mut b = ProgramBuilder::new(&spec.name());
    let fields: Vec<BufferId> = (0..spec.fields())
        .map(|f| b.buffer(&field_name(f), ElemType::I64, field_len, Init::Zeros))
        .collect();
    let scratch: Vec<BufferId> = match kind {
        TaskBenchKernel::MemoryBound { scratch_bytes, .. } => (0..spec.width())
            .map(|p| {
                let init = Init::Fill(SCRATCH_MAGIC as f64);
                b.buffer(
                    &format!("scratch{p}"),
                    ElemType::I64,
                    scratch_bytes / 8,
                    init,
                )
            })
            .collect(),
        _ => Vec::new(),
    };
    // The tasks' input intervals, and the kernels (one per input count) they call.
    let tasks: Vec<Task> = (0..spec.steps())
        .flat_map(|t| points(spec, t).map(move |p| (t, p)))
        .map(|(t, p)| (t, p, dependency_intervals(spec, t, p)))
        .collect();
    let arities: Vec<usize> = tasks
        .iter()
        .map(|(_, _, d)| d.len())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let cuda = kernel::cuda_source(kind, &arities);
    for &n in &arities {
        b.kernel(kernel::task_kernel(kind, n, &cuda));
    }
    let host = spec.host_tasks();
    let entered = !host && !scratch.is_empty();
    if entered {
        let maps = scratch.iter().map(|&s| b.map(MapType::To, s)).collect();
        b.enter_data("scratch_enter", maps);
    }
    let fields_entered = !host && spec.entered();
    if fields_entered {
        let maps = fields.iter().map(|&f| b.map(MapType::To, f)).collect();
        b.enter_data("fields_enter", maps);
    }
    let section = |f: usize, first: usize, points: usize| {
        Section::new(
            fields[f % fields.len()],
            first as u64 * words,
            points as u64 * words,
        )
    };
    let iterations = kind.iterations() as f64;
    for (t, p, intervals) in tasks {
        let name = format!("t{t}_p{p}");
        let kname = kernel::kernel_name(kind, intervals.len());
        let out = section(t, p, 1);
        let ins: Vec<(Section, usize)> = intervals
            .iter()
            .map(|&(a, z)| (section(t + fields.len() - 1, a, z - a + 1), a))
            .collect();
        if host {
            let mut args = vec![
                Arg::Number(t as f64),
                Arg::Number(p as f64),
                Arg::Buffer(out),
            ];
            for &(s, first) in &ins {
                args.extend([Arg::Buffer(s), Arg::Number(first as f64)]);
            }
            if kind != TaskBenchKernel::Empty {
                args.push(Arg::Number(iterations));
            }
            if let Some(&s) = scratch.get(p) {
                args.push(Arg::Buffer(b.sec(s)));
            }
            b.host_kernel(&name, &kname, args);
            continue;
        }
        let mut r = b.target(&name, &kname).num(t as f64).num(p as f64).arg(out);
        for &(s, first) in &ins {
            r = r.arg(s).num(first as f64);
        }
        if kind != TaskBenchKernel::Empty {
            r = r.num(iterations);
        }
        if let Some(&s) = scratch.get(p) {
            r = r
                .arg(s)
                .map(MapType::ToFrom, s)
                .depend(DependType::InOut, s);
        }
        r = r.map(MapType::From, out).depend(DependType::InOut, out);
        for &(s, _) in &ins {
            r = r.map(MapType::To, s).depend(DependType::In, s);
        }
        drop(r.nowait().launch(1, CUDA_THREADS));
    }
    b.taskwait();
    if fields_entered {
        let maps = fields.iter().map(|&f| b.map(MapType::From, f)).collect();
        b.exit_data("fields_exit", maps);
    }
    if entered {
        let maps = scratch
            .iter()
            .map(|&s| b.map(MapType::Release, s))
            .collect();
        b.exit_data("scratch_exit", maps);
    }
    Ok(b.build())
}

/// Checks a finished run's outputs (`buffers`: the run's, e.g. [`crate::exec::Report`]'s
/// `buffers`) against Task Bench's definition: in field `f`, point `p`'s pairs hold
/// `(t, p)` for the last timestep `t ≡ f (mod fields)` of which `p` is a task, and zeros
/// where no task wrote. With each task's own input check this covers every task whose
/// output is still held; the others were checked by their readers.
///
/// Errors: [`TaskBenchError::Output`] naming the buffer, the point and the first wrong
/// pair, or a missing or non-`i64` field buffer.
pub fn check_outputs(spec: &TaskBenchSpec, buffers: &Buffers) -> Result<(), TaskBenchError> {
    let words = (spec.output_bytes() / 8) as usize;
    let nf = spec.fields();
    for f in 0..nf {
        let name = field_name(f);
        let data = buffers.as_i64(&name).ok_or_else(|| {
            TaskBenchError::Output(format!("no i64 buffer `{name}` in the run's buffers"))
        })?;
        if data.len() != words * spec.width() {
            return Err(TaskBenchError::Output(format!(
                "`{name}` holds {} elements, not width {} × {} words",
                data.len(),
                spec.width(),
                words
            )));
        }
        for p in 0..spec.width() {
            let writer = (f..spec.steps())
                .step_by(nf)
                .rev()
                .find(|&t| points(spec, t).contains(&p));
            let want = writer.map_or((0, 0), |t| (t as i64, p as i64));
            let got = &data[p * words..(p + 1) * words];
            if let Some(i) = got.chunks_exact(2).position(|c| (c[0], c[1]) != want) {
                let c = &got[2 * i..2 * i + 2];
                let whose = writer.map_or("no task writes it".to_string(), |t| {
                    format!("task (timestep {t}, point {p}) writes it last")
                });
                return Err(TaskBenchError::Output(format!(
                    "`{name}` point {p} pair {i} is ({}, {}), expected ({}, {}): {whose}",
                    c[0], c[1], want.0, want.1
                )));
            }
        }
    }
    Ok(())
}
