//! Errors found while lowering: unknown kernels, bad arguments, and mapping errors.

use crate::model::{escape_controls as esc, Span};
use thiserror::Error;

/// A lowering error. Every variant names the construct (`region`) and the user's
/// sections, and carries the span of the offending text when the program came from a
/// graph file. Lowering stops at the first error; no op of the program runs.
#[derive(Debug, Error, Clone, PartialEq)]
#[non_exhaustive]
pub enum LowerError {
    /// [`LowerError::help`] says which kernel was meant and lists those the program can
    /// call.
    #[error("region \"{region}\": unknown kernel `{kernel}`", region = esc(region), kernel = esc(kernel))]
    UnknownKernel {
        region: String,
        kernel: String,
        span: Option<Span>,
        /// The kernels the program can call: its own, then the built-ins.
        known: Vec<String>,
    },
    #[error("region \"{region}\": kernel `{kernel}` {detail}", region = esc(region), kernel = esc(kernel), detail = esc(detail))]
    BadArguments {
        region: String,
        kernel: String,
        detail: String,
        span: Option<Span>,
    },
    #[error("region \"{region}\": section {section} is out of bounds of buffer `{buffer}` ({len} elements)", region = esc(region), section = esc(section), buffer = esc(buffer))]
    OutOfBounds {
        region: String,
        section: String,
        buffer: String,
        len: u64,
        span: Option<Span>,
    },
    #[error("region \"{region}\": device {device} does not exist (program has {devices})", region = esc(region))]
    BadDevice {
        region: String,
        device: u32,
        devices: u32,
        span: Option<Span>,
    },
    /// OpenMP 5.2 §5.8.3: `present` on a section with no live mapping.
    #[error("region \"{region}\": map(present) of {section} but {section} is not present on device {device}", region = esc(region), section = esc(section))]
    NotPresent {
        region: String,
        section: String,
        device: u32,
        span: Option<Span>,
    },
    /// OpenMP 5.2 §13.9: `to(present: …)` or `from(present: …)` of a `target update`
    /// whose section is not wholly inside one live mapping (absent, or only partly
    /// mapped: `mapped` names the mappings it touches). Motion clauses are not map
    /// clauses: a partly mapped section is absent for them, not an explicit extension.
    #[error("region \"{region}\": {motion}(present: {section}) but {section} {}", motion_where(mapped, *device), region = esc(region), section = esc(section))]
    MotionNotPresent {
        region: String,
        /// `to` or `from`.
        motion: String,
        section: String,
        /// The live mappings the section overlaps without lying wholly inside one.
        mapped: Vec<String>,
        device: u32,
        span: Option<Span>,
    },
    /// OpenMP 5.2 §5.8.3: a section that partly overlaps a live mapping.
    #[error("region \"{region}\": explicit extension not allowed: {section} extends beyond the mapped {mapped}", region = esc(region), section = esc(section), mapped = esc(mapped))]
    ExplicitExtension {
        region: String,
        section: String,
        mapped: String,
        span: Option<Span>,
    },
    /// A section covered by more than one live mapping (libomptarget: one host section
    /// maps to one contiguous device allocation).
    #[error("region \"{region}\": {section} spans several mappings: {}", mappings.join(", "), region = esc(region), section = esc(section))]
    SpansMappings {
        region: String,
        section: String,
        mappings: Vec<String>,
        span: Option<Span>,
    },
    #[error("region \"{region}\": map type `{map_type}` is not allowed on {construct}", region = esc(region), map_type = esc(map_type), construct = esc(construct))]
    InvalidMapType {
        region: String,
        map_type: String,
        construct: String,
        span: Option<Span>,
    },
    #[error("region \"{region}\": `after` names unknown construct \"{name}\"", region = esc(region), name = esc(name))]
    UnknownAfter {
        region: String,
        name: String,
        span: Option<Span>,
    },
    /// A `taskgraph` the lowering refuses (OpenMP 6.0 §14.3 as this crate models it,
    /// [`crate::model::Taskgraph`]): `repeat` = 0, or one nested inside another.
    #[error("taskgraph \"{name}\": {detail}", detail = esc(detail), name = esc(name))]
    Taskgraph {
        name: String,
        detail: String,
        span: Option<Span>,
    },
    /// A construct whose device storage cannot fit the device memory cap
    /// ([`super::LowerOptions::device_memory`], `lower/cap.rs`), even with every kept
    /// copy evicted: its own working set (the storage of all its map items, implicit
    /// ones included, in bytes) is over the cap, or it is not but the bytes that other
    /// mappings still hold (`held`: `target data`, `enter data` not yet exited) leave
    /// too little. Found before anything runs.
    #[error("region \"{region}\": {}", device_memory(*device, *working_set, *held, *cap), region = esc(region))]
    DeviceMemory {
        region: String,
        device: u32,
        working_set: u64,
        held: u64,
        cap: u64,
        span: Option<Span>,
    },
    /// Two constructs that would be shown by one name (the same name, or a name like the
    /// exit half of a `target data`, `d end`, or like a later execution of a taskgraph
    /// body's construct, `r@1`); located at the later one. See `src/lower/names.rs`.
    #[error("construct \"{name}\": {detail}", name = esc(name), detail = esc(detail))]
    NameClash {
        name: String,
        detail: String,
        span: Option<Span>,
    },
    /// A program the lowering refuses as a whole, before any construct (the same limits
    /// the graph-file loader applies: devices, nesting depth, unique buffer names).
    #[error("program \"{program}\": {detail}", detail = esc(detail), program = esc(program))]
    Program { program: String, detail: String },
}

impl LowerError {
    /// A help line, where the error has one: for an unknown kernel, the closest known
    /// one (``did you mean `saxpy`?``) and the kernels the program can call.
    pub fn help(&self) -> Option<String> {
        match self {
            LowerError::UnknownKernel { kernel, known, .. } => Some(crate::suggest::help_for(
                kernel,
                "kernels",
                known.iter().map(String::as_str),
            )),
            _ => None,
        }
    }

    /// The same error in execution `k` of a taskgraph: the region is renamed `name@k`
    /// as the lowering shows it (nothing changes for `k` = 0 or errors with no region).
    pub(super) fn in_iteration(mut self, k: u32) -> LowerError {
        if k == 0 {
            return self;
        }
        match &mut self {
            LowerError::UnknownKernel { region, .. }
            | LowerError::BadArguments { region, .. }
            | LowerError::OutOfBounds { region, .. }
            | LowerError::BadDevice { region, .. }
            | LowerError::NotPresent { region, .. }
            | LowerError::MotionNotPresent { region, .. }
            | LowerError::ExplicitExtension { region, .. }
            | LowerError::SpansMappings { region, .. }
            | LowerError::InvalidMapType { region, .. }
            | LowerError::UnknownAfter { region, .. }
            | LowerError::DeviceMemory { region, .. } => {
                use std::fmt::Write as _;
                let _ = write!(region, "@{k}");
            }
            LowerError::Taskgraph { .. }
            | LowerError::NameClash { .. }
            | LowerError::Program { .. } => {}
        }
        self
    }

    /// Span of the offending text, if the program came from a graph file.
    pub fn span(&self) -> Option<Span> {
        match self {
            LowerError::UnknownKernel { span, .. }
            | LowerError::BadArguments { span, .. }
            | LowerError::OutOfBounds { span, .. }
            | LowerError::BadDevice { span, .. }
            | LowerError::NotPresent { span, .. }
            | LowerError::MotionNotPresent { span, .. }
            | LowerError::ExplicitExtension { span, .. }
            | LowerError::SpansMappings { span, .. }
            | LowerError::InvalidMapType { span, .. }
            | LowerError::UnknownAfter { span, .. }
            | LowerError::Taskgraph { span, .. }
            | LowerError::DeviceMemory { span, .. }
            | LowerError::NameClash { span, .. } => *span,
            LowerError::Program { .. } => None,
        }
    }
}

/// The text of [`LowerError::DeviceMemory`] after the region.
fn device_memory(device: u32, working_set: u64, held: u64, cap: u64) -> String {
    use crate::model::human_bytes as h;
    let over = |what: String| {
        format!(
            "{what} on device {device}, over the device memory cap of {} ({cap} bytes)",
            h(cap)
        )
    };
    match working_set > cap {
        true => over(format!(
            "its working set is {} ({working_set} bytes)",
            h(working_set)
        )),
        false => over(format!(
            "its working set of {} ({working_set} bytes) does not fit beside the {} \
             ({held} bytes) other mappings still hold",
            h(working_set),
            h(held)
        )),
    }
}

/// The end of [`LowerError::MotionNotPresent`]'s message: where the section is not.
fn motion_where(mapped: &[String], device: u32) -> String {
    if mapped.is_empty() {
        format!("is not present on device {device}")
    } else {
        format!(
            "is not wholly inside one mapping on device {device} (it overlaps {}); a motion \
             clause needs its section inside one mapping (OpenMP 5.2 §13.9)",
            mapped.join(", ")
        )
    }
}
