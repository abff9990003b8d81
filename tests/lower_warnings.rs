//! The lowering's warnings: each on a small graph, rendered as the command line prints it
//! (`file:line:column: warning: …`, the line, a caret, the help), and none where the
//! program means what it says (present data, spin regions modelled by their maps, a map
//! of present data that only orders the region), nor on the sample graphs but one.

mod common;

use offload_sched::error::render_warning;
use offload_sched::file::SourceFile;
use offload_sched::lower::WarningKind;
use offload_sched::model::{
    ElemType, Init, KernelArgs, KernelSig, MapType, ProgramBuilder, Section,
};
use offload_sched::schedule::ScheduleOptions;
use offload_sched::Plan;

const HEAD: &str = r#"name = "w"

[[buffer]]
name = "x"
type = "f32"
len = 16

[[buffer]]
name = "y"
type = "f32"
len = 16
"#;

fn plan(body: &str) -> Plan {
    let src = SourceFile::new("w.toml", format!("{HEAD}{body}"));
    Plan::from_source(src, &ScheduleOptions::default()).unwrap_or_else(|e| panic!("{}", e.render()))
}

/// Every warning of `body`, rendered.
fn warnings(body: &str) -> String {
    let p = plan(body);
    p.warnings()
        .iter()
        .map(|w| render_warning(p.name(), p.source(), w))
        .collect()
}

#[test]
fn an_input_left_out_of_map_is_copied_back_for_nothing() {
    // `x` is only read by saxpy; `y` is mapped.
    let body = "\n[[body]]\ntarget = \"k\"\nkernel = \"saxpy\"\nargs = [2.0, \"x\", \"y\"]\nmap = [\"tofrom: y\"]\n";
    assert_eq!(
        warnings(body),
        "w.toml:14:10: warning: target \"k\": `x` is not in `map`, so it is mapped `tofrom` \
         implicitly, but kernel `saxpy` only reads it: it is copied back for nothing\n\
         14 | target = \"k\"\n   |          ^^^\nhelp: add \"to: x\" to `map`\n"
    );
    let p = plan(body);
    assert_eq!(p.warnings()[0].kind, WarningKind::ImplicitToFrom);
    assert_eq!(p.warnings()[0].construct, "k");
    // A section argument is named as written.
    let body = "\n[[body]]\ntarget = \"k\"\nkernel = \"copy\"\nargs = [\"x[0:8]\", \"y[0:8]\"]\nmap = [\"from: y[0:8]\"]\n";
    assert!(
        warnings(body).contains("`x[0:8]` is not in `map`"),
        "{}",
        warnings(body)
    );
    // An argument the kernel writes is rightly tofrom: no warning.
    let body =
        "\n[[body]]\ntarget = \"k\"\nkernel = \"increment\"\nargs = [\"x\"]\nmap = [\"to: y\"]\n";
    assert!(
        !warnings(body).contains("not in `map`"),
        "{}",
        warnings(body)
    );
}

#[test]
fn a_region_with_no_maps_says_what_it_maps_implicitly() {
    let body = "\n[[body]]\ntarget = \"k\"\nkernel = \"saxpy\"\nargs = [2.0, \"x\", \"y\"]\n";
    let p = plan(body);
    let kinds: Vec<WarningKind> = p.warnings().iter().map(|w| w.kind).collect();
    assert_eq!(kinds, [WarningKind::NoMaps, WarningKind::ImplicitToFrom]);
    assert_eq!(
        render_warning(p.name(), p.source(), &p.warnings()[0]),
        "w.toml:14:10: warning: target \"k\": no `map` clause: x, y are mapped `tofrom` \
         implicitly\n14 | target = \"k\"\n   |          ^^^\n\
         help: map each buffer argument: `to` for inputs, `from` for outputs, `tofrom` for both\n"
    );
    // With its data present (an enclosing target data) a region needs no maps.
    let body = "\n[[body]]\ntarget_data = \"d\"\nmap = [\"tofrom: x\", \"tofrom: y\"]\n\
                [[body.body]]\ntarget = \"k\"\nkernel = \"saxpy\"\nargs = [2.0, \"x\", \"y\"]\n";
    assert_eq!(warnings(body), "");
    // A region that passes no buffer and maps nothing (a spin) moves no data: fine.
    let body = "\n[[body]]\ntarget = \"k\"\nkernel = \"spin\"\nargs = [1]\n";
    assert_eq!(warnings(body), "");
}

#[test]
fn a_map_no_argument_touches_is_pointed_at() {
    let body = "\n[[body]]\ntarget = \"k\"\nkernel = \"increment\"\nargs = [\"x\"]\nmap = [\"tofrom: x\", \"to: y[4:8]\"]\n";
    assert_eq!(
        warnings(body),
        "w.toml:17:26: warning: target \"k\": map item `to: y[4:8]` is not used: no argument \
         of kernel `increment` touches y[4:8], yet it is allocated and copied for the region\n\
         17 | map = [\"tofrom: x\", \"to: y[4:8]\"]\n   |                          ^^^^^^\n\
         help: remove it, or pass `y[4:8]` to the kernel\n"
    );
    let body = "\n[[body]]\ntarget = \"k\"\nkernel = \"increment\"\nargs = [\"x\"]\nmap = [\"tofrom: x\", \"alloc: y\"]\n";
    assert!(
        warnings(body).contains("yet it is allocated for the region"),
        "{}",
        warnings(body)
    );
    // A map overlapping an argument is used.
    let body = "\n[[body]]\ntarget = \"k\"\nkernel = \"increment\"\nargs = [\"x[0:4]\"]\nmap = [\"tofrom: x\"]\n";
    assert_eq!(warnings(body), "");
    // A kernel without buffer parameters models its data by its maps (workflows).
    let body = "\n[[body]]\ntarget = \"k\"\nkernel = \"spin\"\nargs = [1]\nmap = [\"to: x\", \"from: y\"]\n";
    assert_eq!(warnings(body), "");
    // A map of present data only counts a reference (and orders the region): no warning.
    let body = "\n[[body]]\nenter_data = \"e\"\nmap = [\"to: x\", \"to: y\"]\n\
                [[body]]\ntarget = \"k\"\nkernel = \"increment\"\nargs = [\"x\"]\nmap = [\"tofrom: x\", \"tofrom: y\"]\n\
                [[body]]\nexit_data = \"f\"\nmap = [\"from: x\", \"from: y\"]\n";
    assert_eq!(warnings(body), "");
}

#[test]
fn a_program_built_in_rust_gets_its_warnings_by_name() {
    let mut b = ProgramBuilder::new("prog");
    let x = b.buffer("x", ElemType::F32, 4, Init::Zeros);
    let y = b.buffer("y", ElemType::F32, 4, Init::Zeros);
    b.target("r0", "copy").arg(x).arg(y).map(MapType::From, y);
    let p = Plan::new(b.build(), &ScheduleOptions::default()).unwrap();
    assert_eq!(p.warnings().len(), 1);
    assert_eq!(
        render_warning(p.name(), p.source(), &p.warnings()[0]),
        "prog: warning: target \"r0\": `x` is not in `map`, so it is mapped `tofrom` \
         implicitly, but kernel `copy` only reads it: it is copied back for nothing\n\
         help: add `.map(MapType::To, x)` to the region\n"
    );
    // The lowering itself returns them with the op graph.
    assert_eq!(p.graph().warnings, p.warnings());
}

#[test]
fn the_sample_graphs_warn_only_where_the_warning_is_real() {
    let mut found = Vec::new();
    let mut paths: Vec<_> = std::fs::read_dir(common::graphs_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    paths.sort();
    for path in paths {
        let p = Plan::from_file(&path, &ScheduleOptions::default()).unwrap();
        let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
        found.extend(p.warnings().iter().map(|w| format!("{stem}: {w}")));
    }
    // case_m10 transcribes OpenMP case M10, `map(to: A) map(tofrom: A) map(tofrom: B)`
    // on one region, with a one-buffer kernel: B is copied in and out around a kernel
    // that never touches it. The case is kept as specified.
    assert_eq!(
        found,
        [
            "case_m10: target \"a\": map item `tofrom: B` is not used: no argument of kernel \
          `add_scalar` touches B, yet it is allocated and copied for the region"
        ]
    );
}

/// Issue 26 point 4: a host task reading a section whose latest contents are on the
/// device, inside a data region and without `update from`, is warned about at the task,
/// with the `update` that fixes it; none once the update is there, nor when the region
/// copied the data back itself.
#[test]
fn a_host_read_of_data_newer_on_the_device_suggests_the_update() {
    let stale = "\n[[body]]\ntarget_data = \"d\"\nmap = [\"tofrom: x\"]\n\n\
                 [[body.body]]\ntarget = \"k\"\nkernel = \"increment\"\nargs = [\"x\"]\n\n\
                 [[body.body]]\nhost = \"peek\"\nkernel = \"copy\"\nargs = [\"x[0:4]\", \"y[0:4]\"]\n";
    insta::assert_snapshot!("stale_host_read", warnings(stale));
    let p = plan(stale);
    assert_eq!(p.warnings()[0].kind, WarningKind::StaleHostRead);
    assert_eq!(p.warnings()[0].construct, "peek");
    let fixed = stale.replace(
        "[[body.body]]\nhost",
        "[[body.body]]\nupdate = \"get\"\nmap = [\"from: x[0:4]\"]\n\n[[body.body]]\nhost",
    );
    assert_eq!(warnings(&fixed), "");
    // Only the part not brought back is named.
    let part = stale.replace(
        "[[body.body]]\nhost",
        "[[body.body]]\nupdate = \"get\"\nmap = [\"from: x[0:2]\"]\n\n[[body.body]]\nhost",
    );
    assert!(
        warnings(&part).contains("reads x[2:2], whose latest"),
        "{}",
        warnings(&part)
    );
    // A region that maps `tofrom` itself copies back at its end: nothing to warn about.
    let own = "\n[[body]]\ntarget = \"k\"\nkernel = \"increment\"\nargs = [\"x\"]\n\
               map = [\"tofrom: x\"]\n\n[[body]]\nhost = \"peek\"\nkernel = \"copy\"\n\
               args = [\"x[0:4]\", \"y[0:4]\"]\n";
    assert_eq!(warnings(own), "");
}

/// A host task that reads `x` twice, or two overlapping sections of it, names `x` once in
/// the warning and in the suggested `update`.
#[test]
fn a_stale_buffer_read_twice_is_named_once() {
    let mut b = ProgramBuilder::new("prog");
    let x = b.buffer("x", ElemType::F32, 8, Init::Zeros);
    let y = b.buffer("y", ElemType::F32, 8, Init::Zeros);
    b.target_data("d", vec![b.map(MapType::ToFrom, x)], |b| {
        b.target("inc", "increment").arg(x);
        b.host_fn("hr", &[x.into(), x.into()], &[y.into()], |_| Ok(()));
        let part = |lo, len| Section { buf: x, lo, len }.into();
        b.host_fn("parts", &[part(0, 4), part(2, 4)], &[y.into()], |_| Ok(()));
    });
    let p = Plan::new(b.build(), &ScheduleOptions::default()).unwrap();
    let w = p.warnings();
    assert_eq!(w.len(), 2, "{w:?}");
    assert!(
        w[0].message
            .starts_with("host task \"hr\": reads x, whose latest"),
        "{}",
        w[0]
    );
    assert_eq!(
        w[0].help.as_deref(),
        Some(
            "copy them back before it: `p.update(\"NAME\", vec![p.map(MapType::From, x)])` \
             (OpenMP `target update from`, 5.2 §13.9)"
        )
    );
    // The second task reads x[0:4] and x[2:4]; the first's warning did not copy x back.
    assert!(
        w[1].message
            .starts_with("host task \"parts\": reads x[0:6], whose latest"),
        "{}",
        w[1]
    );
    assert!(w[1]
        .help
        .as_deref()
        .unwrap()
        .contains("vec![p.map(MapType::From, x.part(0, 6))]"));
}

#[test]
fn a_rust_closure_reading_data_newer_on_the_device_is_on_the_plans_warning_list() {
    let mut b = ProgramBuilder::new("prog");
    let x = b.buffer("x", ElemType::F32, 4, Init::Zeros);
    let y = b.buffer("y", ElemType::F32, 4, Init::Zeros);
    b.target_data("d", vec![b.map(MapType::ToFrom, x)], |b| {
        b.target("inc", "increment").arg(x);
        b.host_fn("look", &[x.into()], &[y.into()], |_| Ok(()));
    });
    let p = Plan::new(b.build(), &ScheduleOptions::default()).unwrap();
    assert_eq!(p.warnings().len(), 1, "{:?}", p.warnings());
    assert_eq!(
        render_warning(p.name(), p.source(), &p.warnings()[0]),
        "prog: warning: host task \"look\": reads x, whose latest contents are on device 0 (a \
         kernel wrote them there and nothing copied them back): it sees the older host copy\n\
         help: copy them back before it: `p.update(\"NAME\", vec![p.map(MapType::From, x)])` \
         (OpenMP `target update from`, 5.2 §13.9)\n"
    );
}

/// A kernel reading device storage that nothing wrote (mapped `alloc` or `from`, no
/// earlier kernel write) is warned about once per region and buffer, in the graph file's
/// terms or the builder's; storage a kernel wrote first, or a `to` map filled, is not.
#[test]
fn a_kernel_reading_storage_nothing_wrote_is_warned_about() {
    let body = "\n[[body]]\ntarget = \"k\"\nkernel = \"saxpy\"\nargs = [2.0, \"x\", \"y\"]\nmap = [\"alloc: x\", \"tofrom: y\"]\n";
    assert_eq!(
        warnings(body),
        "w.toml:14:10: warning: target \"k\": kernel `saxpy` reads x, whose device copy nothing \
         wrote: no `to` map copied it in (it is mapped `alloc` or `from`) and no earlier kernel \
         wrote it. OpenMP leaves it undefined (5.2 §5.8.3); here it reads zeros\n\
         14 | target = \"k\"\n   |          ^^^\n\
         help: map it `to` (\"to: x\" or \"tofrom: x\") to copy the host's contents in, or write \
         it in an earlier kernel\n"
    );
    assert_eq!(
        plan(body).warnings()[0].kind,
        WarningKind::UndefinedDeviceRead
    );
    // Inside a data region: the first reader is warned about, a reader after a kernel
    // wrote it is not; `from: y` with saxpy reading y is.
    let body = "\n[[body]]\ntarget_data = \"d\"\nmap = [\"alloc: x\"]\n\
                [[body.body]]\ntarget = \"r\"\nkernel = \"saxpy\"\nargs = [2.0, \"x\", \"y\"]\nmap = [\"from: y\"]\n\
                [[body.body]]\ntarget = \"w\"\nkernel = \"fill\"\nargs = [\"x\", 1.0]\n\
                [[body.body]]\ntarget = \"ok\"\nkernel = \"saxpy\"\nargs = [2.0, \"x\", \"y\"]\nmap = [\"tofrom: y\"]\n";
    let p = plan(body);
    let got: Vec<(&str, &str)> = (p.warnings().iter())
        .filter(|w| w.kind == WarningKind::UndefinedDeviceRead)
        .map(|w| {
            (
                w.construct.as_str(),
                &w.message[..w.message.find(',').unwrap()],
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            ("r", "target \"r\": kernel `saxpy` reads x"),
            ("r", "target \"r\": kernel `saxpy` reads y")
        ]
    );
    // In a taskgraph of 3 executions: once, for the first.
    let body = "\n[[body]]\ntarget_data = \"d\"\nmap = [\"alloc: x\", \"tofrom: y\"]\n\
                [[body.body]]\ntaskgraph = \"tg\"\nrepeat = 3\n\
                [[body.body.body]]\ntarget = \"s\"\nkernel = \"saxpy\"\nargs = [2.0, \"x\", \"y\"]\n";
    let p = plan(body);
    let got: Vec<&str> = (p.warnings().iter())
        .filter(|w| w.kind == WarningKind::UndefinedDeviceRead)
        .map(|w| w.construct.as_str())
        .collect();
    assert_eq!(got, ["s"]);
    // Mapped `to`: nothing to say.
    let body = "\n[[body]]\ntarget = \"k\"\nkernel = \"saxpy\"\nargs = [2.0, \"x\", \"y\"]\nmap = [\"to: x\", \"tofrom: y\"]\n";
    assert_eq!(warnings(body), "");
    // Built in Rust: the help names the builder call.
    let mut b = ProgramBuilder::new("prog");
    let x = b.buf::<f32>("x", 8);
    let y = b.buf::<f32>("y", 8);
    b.target("k", "saxpy")
        .num(2.0)
        .arg(x.part(0, 4))
        .arg(y.part(0, 4))
        .map(MapType::Alloc, x)
        .map(MapType::ToFrom, y);
    let p = Plan::new(b.build(), &ScheduleOptions::default()).unwrap();
    assert_eq!(p.warnings().len(), 1, "{:?}", p.warnings());
    assert_eq!(
        p.warnings()[0].help.as_deref(),
        Some(
            "map it `to` (`.map(MapType::To, x.part(0, 4))` or `MapType::ToFrom`) to copy the \
             host's contents in, or write it in an earlier kernel"
        )
    );
}

#[test]
fn a_user_kernel_that_declares_a_write_silences_the_undefined_read_warning() {
    // A Rust kernel with an `out` parameter fills x (mapped `alloc`); the next region's
    // built-in reads it. The lowering cannot know how much a user kernel writes, but it
    // declared a write: no warning (tester finding: it said "no earlier kernel wrote it").
    let mut b = ProgramBuilder::new("prog");
    let x = b.buf::<f32>("x", 8);
    let y = b.buf::<f32>("y", 8);
    let produce = KernelSig::rust("produce")
        .writes::<f32>()
        .body(|a: &mut KernelArgs<'_>| {
            a.output::<f32>(0)?.fill(3.0);
            Ok(())
        });
    b.kernel(produce);
    let maps = vec![b.map(MapType::Alloc, x)];
    b.target_data("d", maps, |b| {
        b.target("make", "produce").arg(x);
        b.target("cons", "copy").arg(x).arg(y).map(MapType::From, y);
    });
    let p = Plan::new(b.build(), &ScheduleOptions::default()).unwrap();
    let undefined: Vec<_> = p
        .warnings()
        .iter()
        .filter(|w| w.kind == WarningKind::UndefinedDeviceRead)
        .collect();
    assert!(undefined.is_empty(), "{undefined:?}");
}
