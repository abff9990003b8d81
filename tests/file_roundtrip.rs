//! `parse(to_toml(p)) == p` modulo spans, for sample files, builder-made programs and
//! random programs; and no panic on garbage. The file stage alone (`to_toml`, `parse`).

mod common;

use common::data_path;
use offload_sched::file::{parse, same_program, strip_spans, to_toml, SourceFile};
use offload_sched::model::{
    Access, Arg, DependType, ElemType, Init, KernelSig, KernelSource, MapItem, MapType, Param,
    ParamKind, Program, ProgramBuilder, Section,
};
use proptest::prelude::*;

fn roundtrip(p: &Program) -> Program {
    let text = to_toml(p);
    match parse(&SourceFile::new("rt.toml", text.clone())) {
        Ok(q) => q,
        Err(e) => panic!("{}\n--- file ---\n{text}", e.render()),
    }
}

fn assert_roundtrip(p: &Program) {
    let q = roundtrip(p);
    let (mut a, mut b) = (p.clone(), q.clone());
    strip_spans(&mut a);
    strip_spans(&mut b);
    assert_eq!(a, b, "\n--- file ---\n{}", to_toml(p));
    // Writing is deterministic and a fixed point.
    assert_eq!(to_toml(&q), to_toml(p));
}

#[test]
fn sample_files_round_trip() {
    for f in ["saxpy.toml", "nested.toml"] {
        let (_, p) = offload_sched::file::load(data_path(f)).unwrap();
        assert_roundtrip(&p);
    }
}

#[test]
fn builder_programs_round_trip() {
    let mut b = ProgramBuilder::new("built");
    b.devices(2);
    let x = b.buffer("x", ElemType::F32, 1024, Init::Iota);
    let y = b.buffer("y", ElemType::F32, 1024, Init::Fill(-0.25));
    let z = b.buffer("z", ElemType::I64, 10, Init::Random(u64::MAX));
    let w = b.buffer("w", ElemType::U8, 0, Init::Zeros);
    b.kernel(KernelSig {
        name: "mine".into(),
        params: vec![
            Param {
                name: "n".into(),
                kind: ParamKind::Scalar {
                    ty: Some(ElemType::I64),
                },
            },
            Param {
                name: "arg1".into(),
                kind: ParamKind::Buffer {
                    ty: None,
                    access: Access::Out,
                },
            },
        ],
        source: KernelSource::User {
            library: Some("lib/x y.so".into()),
            cuda: None,
            symbol: "mine".into(),
        },
    });
    b.target("saxpy", "saxpy")
        .num(2.0)
        .arg(x)
        .arg(Section::new(y, 0, 512))
        .map(MapType::To, x)
        .map_item(
            MapItem::new(MapType::ToFrom, Section::new(y, 0, 512))
                .always()
                .present(),
        )
        .nowait()
        .depend(DependType::InOut, Section::new(y, 0, 512))
        .device(1)
        .launch(8, 64);
    let mx = b.map(MapType::ToFrom, x);
    let mz = b.map(MapType::Alloc, z);
    b.target_data("d \"quoted\"", vec![mx, mz], |b| {
        let m = b.map(MapType::Alloc, z);
        b.enter_data("e", vec![m])
            .nowait()
            .depend(DependType::Out, z);
        b.target("m", "mine")
            .num(3.0)
            .arg(Section::new(z, 2, 3))
            .after("e");
        b.target_data("inner", vec![], |b| {
            let u = b.map(MapType::From, Section::new(x, 1, 0));
            b.update("u", vec![u]).device(0);
            b.taskwait();
        });
        let d = b.map(MapType::Delete, z);
        let r = MapItem {
            close: true,
            ..b.map(MapType::Release, x)
        };
        b.exit_data("x", vec![d, r]);
    });
    b.host_task("h", &[y.into()], &[x.into(), Section::new(z, 0, 1).into()]);
    b.host_kernel(
        "hk",
        "fill",
        vec![Arg::Buffer(Section::new(w, 0, 0)), Arg::Number(7.0)],
    );
    b.target("tiny", "scale")
        .num(1e-7)
        .arg(y)
        .map(MapType::ToFrom, y);
    let p = b.build();
    assert_roundtrip(&p);
    let text = to_toml(&p);
    assert!(
        text.contains("[[body.body.body]]\nupdate = \"u\""),
        "{text}"
    );
    assert!(
        text.contains("init = { random = \"18446744073709551615\" }"),
        "{text}"
    );
    assert!(text.contains("params = [\"n: i64\", \"out T*\"]"), "{text}");
    assert!(
        text.contains("map = [\"to: x\", \"always, present, tofrom: y[0:512]\"]"),
        "{text}"
    );
    assert!(text.contains("args = [1e-7, \"y\"]"), "{text}");
    assert!(same_program(&p, &roundtrip(&p)));
}

#[test]
fn saxpy_text_is_readable() {
    let p = common::saxpy(1024);
    assert_eq!(
        to_toml(&p),
        r#"name = "saxpy"

[[buffer]]
name = "x"
type = "f32"
len = 1024
init = "iota"

[[buffer]]
name = "y"
type = "f32"
len = 1024
init = { fill = 1 }

[[body]]
target = "saxpy"
kernel = "saxpy"
args = [2, "x", "y"]
map = ["to: x", "tofrom: y"]
"#
    );
    assert_roundtrip(&p);
}

// ---- random programs --------------------------------------------------------------

/// A recipe for one construct; numbers are reduced modulo what is available.
#[derive(Clone, Debug)]
enum Step {
    Target {
        buf: usize,
        lo: u64,
        len: u64,
        map: u8,
        nowait: bool,
        dep: Option<u8>,
        dev: u32,
        after: bool,
    },
    Data {
        kind: u8,
        buf: usize,
        map: u8,
        nowait: bool,
    },
    Host {
        read: usize,
        write: usize,
    },
    Taskwait,
    Region {
        buf: usize,
        body: Vec<Step>,
    },
}

fn step() -> impl Strategy<Value = Step> {
    let leaf = prop_oneof![
        (
            any::<usize>(),
            any::<u64>(),
            any::<u64>(),
            0u8..4,
            any::<bool>(),
            proptest::option::of(0u8..3),
            0u32..2,
            any::<bool>()
        )
            .prop_map(
                |(buf, lo, len, map, nowait, dep, dev, after)| Step::Target {
                    buf,
                    lo,
                    len,
                    map,
                    nowait,
                    dep,
                    dev,
                    after
                }
            ),
        (0u8..3, any::<usize>(), 0u8..8, any::<bool>()).prop_map(|(kind, buf, map, nowait)| {
            Step::Data {
                kind,
                buf,
                map,
                nowait,
            }
        }),
        (any::<usize>(), any::<usize>()).prop_map(|(read, write)| Step::Host { read, write }),
        Just(Step::Taskwait),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        (any::<usize>(), proptest::collection::vec(inner, 0..4))
            .prop_map(|(buf, body)| Step::Region { buf, body })
    })
}

fn buffers() -> impl Strategy<Value = Vec<(u8, u64, u8, f64, u64)>> {
    proptest::collection::vec(
        (0u8..5, 0u64..5000, 0u8..4, -1e6f64..1e6, any::<u64>()),
        1..5,
    )
}

fn build(bufs: &[(u8, u64, u8, f64, u64)], steps: &[Step]) -> Program {
    let mut b = ProgramBuilder::new("random");
    b.devices(2);
    let ids: Vec<_> = bufs
        .iter()
        .enumerate()
        .map(|(i, (t, len, init, fill, seed))| {
            let init = match init {
                0 => Init::Zeros,
                1 => Init::Iota,
                2 => Init::Fill(*fill),
                _ => Init::Random(*seed),
            };
            (
                b.buffer(&format!("b{i}"), ElemType::ALL[*t as usize], *len, init),
                *len,
            )
        })
        .collect();
    let mut n = 0usize;
    let mut names: Vec<String> = Vec::new();
    fn go(
        b: &mut ProgramBuilder,
        ids: &[(offload_sched::model::BufferId, u64)],
        steps: &[Step],
        n: &mut usize,
        names: &mut Vec<String>,
    ) {
        for s in steps {
            *n += 1;
            let name = format!("c{n}");
            match s {
                Step::Target {
                    buf,
                    lo,
                    len,
                    map,
                    nowait,
                    dep,
                    dev,
                    after,
                } => {
                    let (id, blen) = ids[buf % ids.len()];
                    let lo = if blen == 0 { 0 } else { lo % (blen + 1) };
                    let len = len % (blen - lo + 1);
                    let sec = Section::new(id, lo, len);
                    let mt = [MapType::To, MapType::From, MapType::ToFrom, MapType::Alloc]
                        [*map as usize];
                    let mut r = b
                        .target(&name, "increment")
                        .arg(sec)
                        .map(mt, sec)
                        .device(*dev);
                    if *nowait {
                        r = r.nowait();
                    }
                    if let Some(d) = dep {
                        r = r.depend(
                            [DependType::In, DependType::Out, DependType::InOut][*d as usize],
                            sec,
                        );
                    }
                    if *after {
                        if let Some(prev) = names.last() {
                            r = r.after(prev);
                        }
                    }
                    drop(r);
                }
                Step::Data {
                    kind,
                    buf,
                    map,
                    nowait,
                } => {
                    let (id, _) = ids[buf % ids.len()];
                    let mut item = match kind {
                        0 => b.map(
                            [MapType::To, MapType::Alloc, MapType::ToFrom][*map as usize % 3],
                            id,
                        ),
                        1 => b.map(
                            [
                                MapType::From,
                                MapType::Release,
                                MapType::Delete,
                                MapType::ToFrom,
                            ][*map as usize % 4],
                            id,
                        ),
                        _ => b.map([MapType::To, MapType::From][*map as usize % 2], id),
                    };
                    item.present = map & 4 != 0;
                    item.always = kind != &2 && map & 2 != 0;
                    let d = match kind {
                        0 => b.enter_data(&name, vec![item]),
                        1 => b.exit_data(&name, vec![item]),
                        _ => b.update(&name, vec![item]),
                    };
                    if *nowait {
                        drop(d.nowait());
                    }
                }
                Step::Host { read, write } => {
                    let r = ids[read % ids.len()].0;
                    let w = ids[write % ids.len()].0;
                    b.host_task(&name, &[r.into()], &[w.into()]);
                }
                Step::Taskwait => {
                    b.taskwait();
                    continue; // a taskwait has no name `after` could use
                }
                Step::Region { buf, body } => {
                    let (id, _) = ids[buf % ids.len()];
                    let m = b.map(MapType::ToFrom, id);
                    b.target_data(&name, vec![m], |b| go(b, ids, body, n, names));
                }
            }
            names.push(name);
        }
    }
    go(&mut b, &ids, steps, &mut n, &mut names);
    b.build()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn random_programs_round_trip(bufs in buffers(), steps in proptest::collection::vec(step(), 1..8)) {
        let p = build(&bufs, &steps);
        let q = roundtrip(&p);
        let (mut a, mut b) = (p.clone(), q);
        strip_spans(&mut a);
        strip_spans(&mut b);
        prop_assert_eq!(a, b);
    }

    #[test]
    fn arbitrary_text_never_panics(s in "\\PC{0,200}") {
        let _ = parse(&SourceFile::new("g.toml", s));
    }

    #[test]
    fn toml_like_text_never_panics(s in "(\\[\\[body(\\.body)*\\]\\]\n|[a-z_]{1,8} = (\"[a-z0-9:\\[\\], ]{0,12}\"|-?[0-9]{1,20}|\\[[\"a-z0-9:, \\[\\]]{0,20}\\]|true|\\{ ?[a-z]+ = [0-9.]+ ?\\})\n){0,25}") {
        let text = format!("name = \"p\"\n[[buffer]]\nname = \"x\"\ntype = \"f32\"\nlen = 8\n{s}");
        let _ = parse(&SourceFile::new("g.toml", text));
    }
}

#[test]
fn truncated_and_mangled_samples_never_panic() {
    for f in ["saxpy.toml", "nested.toml"] {
        let text = std::fs::read_to_string(data_path(f)).unwrap();
        let mut errors = 0;
        for cut in 0..text.len() {
            if !text.is_char_boundary(cut) {
                continue;
            }
            let r = parse(&SourceFile::new("t.toml", &text[..cut]));
            if let Err(e) = r {
                errors += 1;
                let _ = e.render();
                let _ = miette::Diagnostic::labels(&e).map(Iterator::count);
            }
        }
        assert!(
            errors > text.len() / 2,
            "most truncations are errors ({errors})"
        );
        // Replace each byte with characters that break things.
        let bytes = text.as_bytes();
        for i in (0..bytes.len()).step_by(3) {
            for c in [b'"', b'[', b']', b'=', b'9', b'\n', b'-', b':'] {
                let mut v = bytes.to_vec();
                v[i] = c;
                if let Ok(s) = String::from_utf8(v) {
                    if let Err(e) = parse(&SourceFile::new("m.toml", s)) {
                        let _ = e.render();
                    }
                }
            }
        }
    }
}
