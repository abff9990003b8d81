//! User kernels' symbols (issue 25 point 11): a `[[kernel]]` whose `symbol` names a data
//! object (or thread-local data) of its library is refused when the kernel is loaded,
//! with an error naming the symbol, on the host plugin and in the reference
//! interpreter, instead of being called (SIGSEGV); a user kernel named like a built-in
//! is a warning.

mod common;

use offload_sched::lower::WarningKind;
use offload_sched::model::{KernelSig, KernelSource, Param, ParamKind, ProgramBuilder};
use offload_sched::schedule::ScheduleOptions;
use offload_sched::Plan;

const LIB: &str = r#"
#include <stdint.h>
double not_a_function[4] = {1, 2, 3, 4};
const double read_only_table[4] = {5, 6, 7, 8};
__thread int64_t per_thread;
void bump_f64(double* x, int64_t n) {
    for (int64_t i = 0; i < n; i++) x[i] += 1;
}
"#;

fn graph(symbol: &str) -> String {
    format!(
        r#"name = "sym"
[[kernel]]
name = "bump"
params = ["x: inout f64*"]
library = "libsym.so"
symbol = "{symbol}"

[[buffer]]
name = "x"
type = "f64"
len = 8
init = "iota"

[[body]]
target = "k"
kernel = "bump"
args = ["x"]
map = ["tofrom: x"]
"#
    )
}

#[test]
fn a_data_symbol_is_refused_not_called() {
    let dir = tempfile::tempdir().unwrap();
    common::build_so(dir.path(), "sym", LIB).expect("a C compiler (cc) is needed");
    let path = dir.path().join("g.toml");
    // The function runs.
    std::fs::write(&path, graph("bump_f64")).unwrap();
    let plan = Plan::from_file(&path, &ScheduleOptions::default()).unwrap();
    let r = plan.run(&common::host(1, None)).unwrap();
    assert_eq!(r.as_f64("x").unwrap()[7], 8.0);
    for (symbol, what) in [
        (
            "not_a_function",
            "is a data object (ELF symbol type STT_OBJECT)",
        ),
        ("read_only_table", "is a data object"),
        ("per_thread", "is not in executable code"),
    ] {
        std::fs::write(&path, graph(symbol)).unwrap();
        let plan = Plan::from_file(&path, &ScheduleOptions::default()).unwrap();
        let want = format!("symbol \"{symbol}\" in ");
        let e = plan.run(&common::host(1, None)).unwrap_err().render();
        assert!(e.contains(&want) && e.contains(what), "{symbol}: {e}");
        // Located at the `symbol =` value (line 6, column 10) with the line and a caret.
        let at = format!("{}:6:10: error: op #", path.display());
        assert!(e.starts_with(&at), "{symbol}: {e}");
        assert!(e.contains(&format!("6 | symbol = \"{symbol}\"")), "{e}");
        assert!(e.contains("not a function"), "{e}");
        let e = plan.reference().unwrap_err().render();
        assert!(
            e.contains(&want) && e.contains(what),
            "{symbol} (reference): {e}"
        );
    }
}

#[test]
fn a_user_kernel_named_like_a_built_in_is_a_warning() {
    let mut p = ProgramBuilder::new("shadow");
    let x = p.buf::<f32>("x", 4);
    p.kernel(KernelSig {
        name: "fill".into(),
        params: vec![
            Param {
                name: "x".into(),
                kind: ParamKind::parse("out f32*").unwrap(),
            },
            Param {
                name: "v".into(),
                kind: ParamKind::parse("f32").unwrap(),
            },
        ],
        source: KernelSource::User {
            library: Some("libmine.so".into()),
            cuda: None,
            symbol: "my_fill".into(),
        },
    });
    p.target("k", "fill")
        .arg(x)
        .num(1.0)
        .map(offload_sched::model::MapType::From, x);
    let plan = Plan::new(p.build(), &ScheduleOptions::default()).unwrap();
    let w: Vec<_> = plan
        .warnings()
        .iter()
        .filter(|w| w.kind == WarningKind::ShadowsBuiltin)
        .collect();
    assert_eq!(w.len(), 1, "{:?}", plan.warnings());
    assert_eq!(
        w[0].message,
        "kernel `fill` is declared by the program and shadows the built-in kernel of that \
         name: every call of `fill` runs the declared kernel"
    );
    // No warning for a kernel of a name of its own.
    let mut p = ProgramBuilder::new("own");
    let x = p.buf::<f32>("x", 4);
    p.kernel(KernelSig {
        name: "mine".into(),
        params: vec![],
        source: KernelSource::User {
            library: Some("libmine.so".into()),
            cuda: None,
            symbol: "mine".into(),
        },
    });
    p.target("k", "fill")
        .arg(x)
        .num(1.0)
        .map(offload_sched::model::MapType::From, x);
    let plan = Plan::new(p.build(), &ScheduleOptions::default()).unwrap();
    assert!(plan
        .warnings()
        .iter()
        .all(|w| w.kind != WarningKind::ShadowsBuiltin));
}

/// Finding s12-6: a library that does not load is reported at run time (schedule and
/// verify do not load libraries) at the `library =` value of the kernel's `[[kernel]]`
/// table; a declared kernel shadowing a built-in is warned at its `name =`.
#[test]
fn a_library_that_does_not_load_and_a_shadowing_kernel_are_located() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("g.toml");
    std::fs::write(
        &path,
        graph("bump_f64").replace("libsym.so", "/nonexistent/libx.so"),
    )
    .unwrap();
    let plan = Plan::from_file(&path, &ScheduleOptions::default()).unwrap();
    let e = plan.run(&common::host(1, None)).unwrap_err().render();
    let at = format!("{}:5:11: error: op #", path.display());
    assert!(e.starts_with(&at), "{e}");
    assert!(
        e.contains("cannot load library /nonexistent/libx.so")
            && e.contains("5 | library = \"/nonexistent/libx.so\"")
            && e.contains("^^^^"),
        "{e}"
    );
    // The shadow warning.
    let text = graph("bump_f64").replacen("name = \"bump\"", "name = \"increment\"", 1);
    let text = text.replace("kernel = \"bump\"", "kernel = \"increment\"");
    std::fs::write(&path, &text).unwrap();
    let plan = Plan::from_file(&path, &ScheduleOptions::default()).unwrap();
    let w = plan
        .warnings()
        .iter()
        .find(|w| w.kind == WarningKind::ShadowsBuiltin)
        .expect("a shadow warning");
    let r = offload_sched::error::render_warning(plan.name(), plan.source(), w);
    assert!(
        r.starts_with(&format!(
            "{}:3:8: warning: kernel `increment`",
            path.display()
        )),
        "{r}"
    );
    assert!(r.contains("3 | name = \"increment\""), "{r}");
}
