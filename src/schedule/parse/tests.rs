use super::*;
use crate::verify::tests::saxpy;

#[test]
fn saxpy_round_trips() {
    let (g, s) = saxpy();
    let text = s.to_string();
    assert_eq!(parse(&text, &g), Ok(s.clone()));
    // Spacing, blank lines and CRLF do not matter.
    let loose = text.replace("\n", "\r\n\n").replace("    ", " ");
    assert_eq!(parse(&loose, &g), Ok(s));
}

fn saxpy_text() -> String {
    saxpy().1.to_string()
}

#[test]
fn errors_name_line_column_and_what_was_expected() {
    let text = saxpy_text();
    let cases: Vec<(String, &str)> = vec![
        (
            String::new(),
            "1:1: expected a header `schedule \"NAME\" policy=POLICY streams=N (pool N \
             per device)`, found end of text",
        ),
        (text.replace("policy=minimal", "policy=fast"), "1:25: expected a policy: `per-op`, `per-region` or `minimal`, found `fast streams=1 (pool 4 per device)`"),
        (text.replace("s0 (device 0)", "s9 (device 0)"), "2:2: no stream s9: 1 device(s) with pool 4 have s0 to s3"),
        (text.replace("s0 (device 0)", "s1 (device 1)"), "2:12: stream s1 is of device 0 (pool 4 per device), not 1"),
        (text.replace("kernel   saxpy", "d2h      saxpy"), "7:10: op #4 is `#4 kernel saxpy region \"saxpy\"` in the graph, the text says `#4 d2h saxpy region \"saxpy\"`"),
        (text.replace("#8     end", "#9     end"), "13:4: no op #9: the graph has 9 ops"),
        (text.replace("summary: 9 ops", "summary: 8 ops"), "14:10: the number of ops is 9, the text says 8"),
        (text.replace("1 host wait", "2 host waits"), "14:37: the number of host waits is 1, the text says 2"),
        (text.replace("0 events", "11 events"), "14:27: the number of events (each recorded by a step) is at most 10, the text says 11"),
        (text.replace("1 host wait", "1 host waits"), "14:48: expected end of line, found `s`"),
        (text.replace("(after #7)", "(after #6)"), "12:11: the last op on the stream before this host wait is `(after #7)`, the text says `(after #6)`"),
        (text.replace("(after #7)", ""), "12:11: the last op on the stream before this host wait is `(after #7)`, the text says nothing"),
        (text.replace("  #8", "#8"), "13:1: expected a block header (`sN (device N):` or `host:`), an indented line, `issue order:` or `summary:`, found `#8     end                              …`"),
        (text.replace("host:", "s0 (device 0):"), "11:1: a second s0 block (the first is at line 2)"),
        (text.replace("host:\n  wait s0", "host:\n  wait s0\n  #4 kernel saxpy region \"saxpy\"\n  wait s0"), "13:3: op #4 is already in the s0 block (line 7); an op is on one stream, or on the host"),
        (text.replace("  wait s0 (after #7)\n", "  wait s0 (after #7)\n  wait e99999999999\n"), "13:9: expected an event number (a number below 2^32), found `99999999999`"),
        (text.replace("streams=1", "streams=2"), "1:41: the number of streams with ops is 1, the text says 2"),
        (text.replace("(pool 4", "(pool 0"), "1:49: expected a pool size from 1 to 1024, found `0 per device)`"),
        (format!("{text}more\n"), "15:1: expected end of text after the summary, found `more`"),
        (text.replace("summary: 9 ops, 1 stream, 0 events, 1 host wait\n", ""), "13:56: expected a block, `issue order:` or `summary:`, found end of text"),
        (text.replace("  wait s0 (after #7)", "  wait x0"), "12:8: expected `sN`, `eN` or `device N`, found `x0`"),
        (text.replace("  #0 ", "  record e0 extra\n  #0 "), "3:13: expected end of line, found `extra`"),
        (text.replace("summary:", "issue order: s0 8, host 1\nsummary:"), "14:1: the number of lines in the host block is 2, the text says 1"),
        (text.replace("summary:", "issue order: s0 8, host 3\nsummary:"), "14:20: the number of lines in the host block is 2, the text says at least 3"),
        // An explicit order that is the rule's.
        (text.replace("summary:", "issue order: s0 8, host 2\nsummary:"), "ok"),
        (text.replace("summary:", "issue order: s0 5, host 2, s0 3\nsummary:"), "12:11: the last op on the stream before this host wait is `(after #4)`, the text says `(after #7)`"),
    ];
    let (g, _) = saxpy();
    let got: Vec<String> = cases
        .iter()
        .map(|(t, _)| match parse(t, &g) {
            Ok(_) => "ok".to_string(),
            Err(e) => {
                assert!(e
                    .to_string()
                    .starts_with(&format!("{}:{}: ", e.line(), e.column())));
                e.to_string()
            }
        })
        .collect();
    let want: Vec<&str> = cases.iter().map(|c| c.1).collect();
    assert_eq!(
        got,
        want,
        "{}",
        got.iter()
            .map(|g| format!("{g:?}"))
            .collect::<Vec<_>>()
            .join(",\n")
    );
}

/// A schedule whose steps do not follow the text's rule (the host wait moved to the
/// start, before any op) prints with an `issue order:` line, and reads back the same.
/// Right after an h2d it would follow the rule: a `host wait` line of s0.
#[test]
fn a_hand_made_issue_order_is_printed_and_read_back() {
    let (g, mut s) = saxpy();
    let w = s.steps.iter().position(|st| st.is_host_wait()).unwrap();
    let wait = s.steps.remove(w);
    let mut after_h2d = s.clone();
    after_h2d.steps.insert(4, wait);
    let text = after_h2d.to_string();
    assert!(text.contains("y[0:1024] 4 KiB          region \"saxpy\"\n  host wait\n  #4 "));
    assert!(!text.contains("issue order"), "{text}");
    assert_eq!(parse(&text, &g), Ok(after_h2d));
    s.steps.insert(0, wait);
    let text = s.to_string();
    assert!(
        text.contains("\nhost:\n  wait s0\n  #8 ")
            && text.contains("\nissue order: host 1, s0 8, host 1\nsummary:"),
        "{text}"
    );
    assert_eq!(parse(&text, &g), Ok(s));
}

#[test]
fn names_with_quotes_backslashes_and_newlines_are_escaped_and_read_back() {
    use crate::model::{ElemType, Init, MapType, ProgramBuilder};
    use crate::schedule::{schedule, ScheduleOptions};
    let prog_name = "p\" policy=per-op streams=9 \\";
    let region_name = "r\" region \"x\ny";
    let mut p = ProgramBuilder::new(prog_name);
    let x = p.buffer("x", ElemType::F32, 16, Init::Iota);
    p.target(region_name, "scale")
        .num(2.0)
        .arg(x)
        .map(MapType::ToFrom, x);
    let g = crate::lower::lower(&p.build()).unwrap();
    let s = schedule(&g, &ScheduleOptions::default());
    let text = s.to_string();
    let header = text.lines().next().unwrap();
    assert_eq!(
        header,
        r#"schedule "p\" policy=per-op streams=9 \\" policy=minimal streams=1 (pool 4 per device)"#
    );
    // Every op line names the region once, escaped: the quotes and the newline cannot
    // end the field or the line. The graph's region name is already the shown name (the
    // lowering writes the newline `\n`, `lower::builder`): only its quotes are escaped.
    assert_eq!(g.regions[0].name, "r\" region \"x\\ny");
    let field = r#"region "r\" region \"x\ny""#;
    let named = text.lines().filter(|l| l.ends_with(field)).count();
    assert_eq!(named, g.regions[0].ops.len());
    assert_eq!(
        text.lines().filter(|l| l.contains("region \"")).count(),
        g.op_ids().count()
    );
    let back = parse(&text, &g).unwrap();
    assert_eq!(back.name, prog_name);
    assert_eq!(back, s);
}
