//! Numbers echoed in messages (issue 15 point 7): a huge or tiny value from a graph file,
//! a WfCommons file, an option, the builder or a buffer prints in scientific notation
//! (`1e308`), never as 309 decimal digits; ordinary values print as before. (Command-line
//! options: crates/cli/tests/cli_bad_input.rs.)

use offload_sched::exec::{BufferData, Buffers};
use offload_sched::file::{parse, SourceFile};
use offload_sched::import::{import_wfcommons, WfOptions};
use offload_sched::lower::lower;
use offload_sched::model::{ElemType, Init, MapType, ProgramBuilder};
use offload_sched::reference::check;

fn file_error(body: &str) -> String {
    let text = format!("name = \"p\"\n[[buffer]]\nname = \"x\"\ntype = \"i32\"\nlen = 4\n{body}");
    parse(&SourceFile::new("g.toml", &text))
        .expect_err("the file must be refused")
        .message()
        .to_string()
}

#[test]
fn graph_file_numbers_in_errors_are_short() {
    assert_eq!(
        file_error("[[body]]\ntarget = \"k\"\nkernel = \"fill\"\nargs = [\"x\", 1e308]\n"),
        "argument 2 (`v: T`) of kernel `fill` in target \"k\" is 1e308, not a valid i32 value"
    );
    assert_eq!(
        file_error("[[body]]\ntarget = \"k\"\nkernel = \"fill\"\nargs = [-1.5e-300, 2.0]\n"),
        "argument 1 (`buf: out T*`) of kernel `fill` in target \"k\" must be a buffer section, found the number -1.5e-300"
    );
    // Ordinary values as before.
    assert_eq!(
        file_error("[[body]]\ntarget = \"k\"\nkernel = \"fill\"\nargs = [\"x\", 2.5]\n"),
        "argument 2 (`v: T`) of kernel `fill` in target \"k\" is 2.5, not a valid i32 value"
    );
}

#[test]
fn builder_numbers_in_lower_errors_are_short() {
    let mut p = ProgramBuilder::new("p");
    p.buffer("x", ElemType::F32, 4, Init::Zeros);
    p.target("k", "spin").num(1e308);
    assert_eq!(
        lower(&p.build()).unwrap_err().to_string(),
        "region \"k\": kernel `spin` takes a duration in µs from 0 to 3.6e9 (one hour), got 1e308"
    );
    let mut p = ProgramBuilder::new("p");
    let x = p.buffer("x", ElemType::F32, 4, Init::Zeros);
    p.target("k", "fill")
        .num(1e300)
        .num(1.0)
        .map(MapType::ToFrom, x);
    assert_eq!(
        lower(&p.build()).unwrap_err().to_string(),
        "region \"k\": kernel `fill` parameter `buf` is a buffer (out T*), got the number 1e300"
    );
}

#[test]
fn check_values_are_short() {
    let one = |v: f64| Buffers::new(vec![("y".into(), BufferData::F64(vec![v]))]);
    assert_eq!(
        check(&one(1e308), &one(1.0)).unwrap_err().to_string(),
        "buffer \"y\"[0] = 1e308, expected 1"
    );
    let one = |v: f32| Buffers::new(vec![("y".into(), BufferData::F32(vec![v]))]);
    assert_eq!(
        check(&one(-3e38), &one(1e-40)).unwrap_err().to_string(),
        "buffer \"y\"[0] = -3e38, expected 1e-40"
    );
}

#[test]
fn wfcommons_numbers_in_errors_are_short() {
    let o = |t: f64, s: f64| WfOptions {
        time_scale: t,
        size_scale: s,
    };
    let e = import_wfcommons("{}", "w.json", &o(-1e300, 1.0)).unwrap_err();
    assert_eq!(
        e.to_string(),
        "w.json: option time_scale = -1e300 is invalid: a scale must be a finite number >= 0"
    );
    let wf = |field: &str| {
        format!("{{\"schemaVersion\": \"1.5\", \"workflow\": {{\"specification\": {{\"tasks\": [{{\"id\": \"a\", \"parents\": [], \"children\": [], \"inputFiles\": [\"f\"], \"outputFiles\": []}}], \"files\": [{{\"id\": \"f\", {field}}}]}}, \"execution\": {{\"tasks\": []}}}}}}")
    };
    let e = import_wfcommons(&wf("\"sizeInBytes\": -1e300"), "w.json", &o(1.0, 1.0)).unwrap_err();
    assert!(
        e.to_string()
            .ends_with("expected a number >= 0, found -1e300"),
        "{e}"
    );
    let e = import_wfcommons(&wf("\"sizeInBytes\": 1e30"), "w.json", &o(1.0, 1.0)).unwrap_err();
    assert!(
        e.to_string()
            .contains("file \"f\" is 1e30 bytes after scaling"),
        "{e}"
    );
}
