//! Bytes → a program built through the public builder API (buffers, target regions with
//! map clauses, `nowait`/`depend`/`after`/`device`, target data, enter / exit data,
//! update, taskwait, host tasks and host kernels) → lower → schedule (every policy
//! verified) → execute on the host plugin → every buffer compared with the reference
//! interpreter (`reference::reference` + `reference::check`, what `run --check` does).
//!
//! Lowering may refuse a program (`Err` is fine, its message must render). A program that
//! lowers must schedule, verify, run, leave no device or host memory allocated and give
//! the reference's buffers: anything else panics, as does a panic inside the library.
//!
//! Sizes stay small so one input runs in about a millisecond: at most 5 buffers of at
//! most 32 elements, at most 40 constructs, `target data` nested at most 5 deep, `spin`
//! at most 20 µs. The bytes are read front to back as choices; missing bytes read as 0.
#![no_main]

use libfuzzer_sys::fuzz_target;
use offload_sched::exec::{execute, ExecOptions, IssueMode};
use offload_sched::reference::{check, reference};
use offload_sched::lower::lower;
use offload_sched::model::{
    builtin_kernel, builtin_kernels, Arg, BufferId, DependType, ElemType, Init, MapItem, MapType,
    ParamKind, Program, ProgramBuilder, Section,
};
use offload_sched::plugin::host::{HostPlugin, HostPluginOptions};
use offload_sched::schedule::{schedule, ScheduleOptions, SyncPolicy};
use offload_sched::verify::verify;

const MAX_BUFFERS: usize = 5;
const MAX_LEN: u64 = 32;
const MAX_CONSTRUCTS: usize = 40;
const MAX_DEPTH: usize = 5;

/// Scalars: small integers mostly, and the values that stress conversions.
const SCALARS: [f64; 16] = [
    0.0,
    1.0,
    2.0,
    3.0,
    -1.0,
    0.5,
    -2.5,
    7.0,
    255.0,
    256.0,
    1e10,
    -1e10,
    f64::NAN,
    f64::INFINITY,
    1e308,
    -0.0,
];

/// The input as a stream of choices.
struct In<'a> {
    d: &'a [u8],
    at: usize,
}

impl In<'_> {
    fn u8(&mut self) -> u8 {
        let b = self.d.get(self.at).copied().unwrap_or(0);
        self.at += 1;
        b
    }
    /// `0..n` (n ≥ 1).
    fn pick(&mut self, n: usize) -> usize {
        self.u8() as usize % n
    }
    /// True one time in `n` (n ≤ 256; never on missing bytes, so a short input builds
    /// a short program without its flaws).
    fn one_in(&mut self, n: usize) -> bool {
        self.pick(n) == n - 1
    }
    fn done(&self) -> bool {
        self.at >= self.d.len()
    }
}

struct Gen<'a, 'b> {
    r: &'b mut In<'a>,
    lens: Vec<u64>,
    tys: Vec<ElemType>,
    devices: u32,
    constructs: usize,
    names: Vec<String>,
    /// Built-in kernels the regions and host kernels draw from (`model::builtin_kernels`).
    kernels: Vec<String>,
}

impl Gen<'_, '_> {
    fn name(&mut self, prefix: &str) -> String {
        let n = format!("{prefix}{}", self.names.len());
        self.names.push(n.clone());
        n
    }

    /// A section of any buffer.
    fn section(&mut self) -> Section {
        let b = self.r.pick(self.lens.len());
        self.section_of(b)
    }

    /// A section of buffer `b`, or now and then of a buffer of the same element type as
    /// `b` (`like`): mostly the whole buffer or an aligned half or quarter (sections that
    /// nest, so most programs map without extension errors), sometimes any in-bounds
    /// range; rarely out of bounds, at the end of `u64`, or of a buffer id this program
    /// does not have.
    fn section_of(&mut self, b: usize) -> Section {
        let b = if self.r.one_in(256) {
            self.lens.len()
        } else {
            b
        };
        let n = self.lens.get(b).copied().unwrap_or(4);
        let (lo, len) = match self.r.pick(256) {
            0..=111 => (0, n),
            112..=207 => {
                let parts = 2u64 << self.r.pick(2); // halves or quarters
                let k = self.r.pick(parts as usize) as u64;
                let (lo, hi) = (n * k / parts, n * (k + 1) / parts);
                (lo, hi - lo)
            }
            208..=253 => {
                let lo = self.r.pick(n as usize + 1) as u64;
                let len = self.r.pick((n - lo) as usize + 1) as u64;
                (lo, len)
            }
            254 => (self.r.pick(40) as u64, self.r.pick(40) as u64),
            _ => (u64::MAX - self.r.pick(4) as u64, self.r.pick(4) as u64),
        };
        Section::new(BufferId(b as u32), lo, len)
    }

    /// A buffer of element type `ty` (one at random if none has it).
    fn buffer_like(&mut self, ty: ElemType) -> usize {
        let same: Vec<usize> = (0..self.tys.len()).filter(|&j| self.tys[j] == ty).collect();
        if same.is_empty() || self.r.one_in(32) {
            self.r.pick(self.tys.len())
        } else {
            same[self.r.pick(same.len())]
        }
    }

    fn scalar(&mut self) -> f64 {
        SCALARS[self.r.pick(SCALARS.len())]
    }

    fn map_item(&mut self, types: &[MapType]) -> MapItem {
        let t = if self.r.one_in(64) {
            MapType::ALL[self.r.pick(MapType::ALL.len())]
        } else {
            types[self.r.pick(types.len())]
        };
        let s = self.section();
        let mut m = MapItem::new(t, s);
        let bits = self.r.u8();
        if bits % 4 == 1 {
            m = m.always();
        }
        if bits % 64 == 3 {
            m = m.present();
        }
        m.close = bits % 16 == 5;
        m
    }

    fn maps(&mut self, types: &[MapType]) -> Vec<MapItem> {
        let n = self.r.pick(4);
        (0..n).map(|_| self.map_item(types)).collect()
    }

    fn device(&mut self) -> u32 {
        if self.r.one_in(128) {
            self.devices // one past the last
        } else {
            self.r.pick(self.devices as usize) as u32
        }
    }

    fn depend(&mut self) -> (DependType, Section) {
        let t = [DependType::In, DependType::Out, DependType::InOut][self.r.pick(3)];
        (t, self.section())
    }

    /// Arguments for `kernel`'s signature: sections for buffers (of the first buffer's
    /// element type, mostly), scalars for scalars (small values where a scalar sizes the
    /// work), rarely the wrong kind or one argument short.
    fn args(&mut self, kernel: &str) -> Vec<Arg> {
        let Some(sig) = builtin_kernel(kernel) else {
            return Vec::new();
        };
        let mut args = Vec::new();
        let mut ty = None;
        for (i, p) in sig.params.iter().enumerate() {
            let wrong = self.r.one_in(128);
            let buffer = matches!(p.kind, ParamKind::Buffer { .. }) != wrong;
            if buffer {
                let b = match ty {
                    None => self.r.pick(self.tys.len()),
                    Some(t) => self.buffer_like(t),
                };
                ty = ty.or(self.tys.get(b).copied());
                args.push(Arg::Buffer(self.section_of(b)));
            } else {
                let v = match (kernel, i) {
                    ("spin", _) => self.r.pick(21) as f64,
                    ("jacobi5", 0 | 1) | ("matmul_block", 0) => self.r.pick(7) as f64,
                    _ => self.scalar(),
                };
                args.push(Arg::Number(v));
            }
        }
        if self.r.one_in(128) {
            args.pop();
        }
        args
    }

    fn region(&mut self, p: &mut ProgramBuilder) {
        let kernel = self.kernels[self.r.pick(self.kernels.len())].clone();
        let kernel = kernel.as_str();
        let name = self.name("r");
        let args = self.args(kernel);
        // Map each buffer argument (mostly), then a few other items.
        let mut maps = Vec::new();
        for a in &args {
            if let Arg::Buffer(s) = a {
                if !self.r.one_in(8) {
                    let t = [MapType::ToFrom, MapType::To, MapType::From, MapType::Alloc]
                        [self.r.pick(4)];
                    let mut m = MapItem::new(t, *s);
                    if self.r.one_in(4) {
                        m = m.always();
                    }
                    if self.r.one_in(64) {
                        m = m.present();
                    }
                    maps.push(m);
                }
            }
        }
        maps.extend(self.maps(&[MapType::To, MapType::From, MapType::ToFrom, MapType::Alloc]));
        let nowait = self.r.one_in(3);
        let depends: Vec<_> = (0..self.r.pick(3)).map(|_| self.depend()).collect();
        let device = self.device();
        let after = if self.r.one_in(32) && !self.names.is_empty() {
            let k = self.r.pick(self.names.len() + 1);
            Some(
                self.names
                    .get(k)
                    .cloned()
                    .unwrap_or_else(|| "nowhere".into()),
            )
        } else {
            None
        };
        let launch = self
            .r
            .one_in(8)
            .then(|| (self.r.pick(3) as u32, self.r.pick(65) as u32));
        let mut rb = p.target(&name, kernel).device(device);
        for a in args {
            rb = match a {
                Arg::Buffer(s) => rb.arg(s),
                Arg::Number(v) => rb.num(v),
            };
        }
        for m in maps {
            rb = rb.map_item(m);
        }
        if nowait {
            rb = rb.nowait();
        }
        for (t, s) in depends {
            rb = rb.depend(t, s);
        }
        if let Some(a) = after {
            rb = rb.after(&a);
        }
        if let Some((teams, threads)) = launch {
            rb = rb.launch(teams, threads);
        }
        drop(rb);
    }

    /// enter (0), exit (1) or update (2).
    fn data(&mut self, p: &mut ProgramBuilder, which: u8) {
        let types: &[MapType] = match which {
            0 => &[MapType::To, MapType::Alloc, MapType::ToFrom],
            1 => &[MapType::From, MapType::Release, MapType::Delete],
            _ => &[MapType::To, MapType::From],
        };
        let maps = self.maps(types);
        let name = self.name(["enter", "exit", "upd"][which as usize]);
        let nowait = self.r.one_in(3);
        let depends: Vec<_> = (0..self.r.pick(3)).map(|_| self.depend()).collect();
        let device = self.device();
        let mut db = match which {
            0 => p.enter_data(&name, maps),
            1 => p.exit_data(&name, maps),
            _ => p.update(&name, maps),
        }
        .device(device);
        if nowait {
            db = db.nowait();
        }
        for (t, s) in depends {
            db = db.depend(t, s);
        }
        drop(db);
    }

    fn host(&mut self, p: &mut ProgramBuilder) {
        let name = self.name("h");
        if self.r.one_in(2) {
            let reads: Vec<_> = (0..self.r.pick(3)).map(|_| self.section().into()).collect();
            let writes: Vec<_> = (0..self.r.pick(3)).map(|_| self.section().into()).collect();
            p.host_task(&name, &reads, &writes);
        } else {
            let kernel = self.kernels[self.r.pick(self.kernels.len())].clone();
            let args = self.args(&kernel);
            p.host_kernel(&name, &kernel, args);
        }
    }

    /// Constructs until the input ends, the budget is spent, or (inside a target data)
    /// a close choice.
    fn body(&mut self, p: &mut ProgramBuilder, depth: usize) {
        while !self.r.done() && self.constructs < MAX_CONSTRUCTS {
            self.constructs += 1;
            match self.r.pick(16) {
                0..=5 => self.region(p),
                6 if depth < MAX_DEPTH => {
                    let maps =
                        self.maps(&[MapType::ToFrom, MapType::To, MapType::From, MapType::Alloc]);
                    let name = self.name("td");
                    p.target_data(&name, maps, |p| self.body(p, depth + 1));
                }
                7 => self.data(p, 0),
                8 => self.data(p, 1),
                9 => self.data(p, 2),
                10 => {
                    p.taskwait();
                }
                11 | 12 => self.host(p),
                13 | 14 if depth > 0 => return,
                _ => self.region(p),
            }
        }
    }
}

/// How the program is scheduled and run.
struct Run {
    opts: ScheduleOptions,
    issue: IssueMode,
}

fn build(r: &mut In) -> (Program, Run) {
    let devices = 1 + r.pick(2) as u32;
    let opts = ScheduleOptions {
        policy: SyncPolicy::ALL[r.pick(3)],
        streams_per_device: 1 + r.pick(4) as u32,
        random_streams: r.one_in(2).then(|| r.u8() as u64),
        host_lanes: 1,
    };
    let issue = [
        IssueMode::Serial,
        IssueMode::PerStream,
        IssueMode::PerGroup,
        IssueMode::Auto,
    ][r.pick(4)];
    let mut p = ProgramBuilder::new("fuzz");
    if devices > 1 {
        p.devices(devices);
    }
    let nb = 1 + r.pick(MAX_BUFFERS);
    let (mut lens, mut tys) = (Vec::new(), Vec::new());
    for k in 0..nb {
        let ty = ElemType::ALL[r.pick(5)];
        let len = r.pick(MAX_LEN as usize + 1) as u64;
        let init = match r.pick(4) {
            0 => Init::Zeros,
            1 => Init::Iota,
            2 => Init::Fill(SCALARS[r.pick(SCALARS.len())]),
            _ => Init::Random(r.u8() as u64),
        };
        p.buffer(&format!("b{k}"), ty, len, init);
        lens.push(len);
        tys.push(ty);
    }
    let mut g = Gen {
        r,
        lens,
        tys,
        devices,
        constructs: 0,
        names: Vec::new(),
        kernels: builtin_kernels().into_iter().map(|k| k.name).collect(),
    };
    g.body(&mut p, 0);
    (p.build(), Run { opts, issue })
}

/// `BUILD_RUN_STATS=1`: one line per input on stderr, what lowering made of it (to see
/// what share of inputs gets past lowering).
fn stats() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("BUILD_RUN_STATS").is_some())
}

fuzz_target!(|data: &[u8]| {
    let mut r = In { d: data, at: 0 };
    let (program, run) = build(&mut r);
    let graph = match lower(&program) {
        Ok(g) => g,
        Err(e) => {
            let msg = e.to_string();
            if stats() {
                eprintln!("build_run: refused: {msg}");
            }
            return;
        }
    };
    if stats() {
        eprintln!(
            "build_run: lowered {} ops, {} regions",
            graph.ops.len(),
            graph.regions.len()
        );
    }
    for policy in SyncPolicy::ALL {
        let o = ScheduleOptions { policy, ..run.opts };
        let s = schedule(&graph, &o);
        if let Err(e) = verify(&graph, &s) {
            panic!("{policy} schedule does not verify: {e}\n{s}");
        }
    }
    let want = reference(&graph, &ExecOptions::default())
        .unwrap_or_else(|e| panic!("the reference interpreter fails: {e}"));
    let s = schedule(&graph, &run.opts);
    let plugin = HostPlugin::new(HostPluginOptions {
        devices: graph.devices,
        ..HostPluginOptions::default()
    });
    let opts = ExecOptions {
        issue: run.issue,
        ..ExecOptions::default()
    };
    let report = execute(&graph, &s, &plugin, &opts)
        .unwrap_or_else(|e| panic!("a program that lowers fails to run: {e}\n{s}"));
    assert_eq!(plugin.live_device_allocs(), 0, "device memory leaked\n{s}");
    assert_eq!(plugin.live_host_allocs(), 0, "host memory leaked\n{s}");
    if let Err(e) = check(&report.buffers, &want) {
        panic!("the host plugin differs from the reference: {e}\n{s}");
    }
});
