//! `rank = N` in graph files: the owner of a `[[buffer]]` and the rank of a `[[body]]`
//! target region or host task (nested bodies included), for a distributed run. One process ignores the key.
//!
//! ```toml
//! [[buffer]]
//! name = "y"
//! type = "f32"
//! len = 1024
//! rank = 1          # rank 1 owns y
//!
//! [[body]]
//! target = "saxpy"
//! kernel = "saxpy"
//! args = [2.0, "x", "y"]
//! map = ["to: x", "tofrom: y"]
//! rank = 0          # runs on rank 0 whatever it writes
//! ```

use super::Distribution;
use crate::file::{ErrorKind, FileError, SourceFile};
use crate::model::{Program, Span};
use toml_edit::{ImDocument, Item};

/// The distribution over `ranks` ranks that `src` (the graph file `program` was loaded
/// from) asks for: [`Distribution::new`]'s defaults, each `[[buffer]]` with `rank = N`
/// owned by rank `N`, each `[[body]]` target region or host task with `rank = N`
/// (at the top level or nested in a `target_data` / `taskgraph` body) placed on rank `N`.
///
/// Errors: a `FileError` at the value for a `rank` that is not an integer in
/// `0..ranks`; [`ErrorKind::BadValue`] without a position for a bad `ranks`.
pub fn distribution_from_source(
    src: &SourceFile,
    program: &Program,
    ranks: u32,
) -> Result<Distribution, FileError> {
    let mut dist = Distribution::new(ranks)
        .map_err(|e| FileError::without_source(ErrorKind::BadValue, &src.path, e.to_string()))?;
    let doc = ImDocument::parse(src.text.as_str()).map_err(|e| {
        FileError::at(
            ErrorKind::Syntax,
            &src.path,
            &src.text,
            e.span().map(|r| Span::new(r.start, r.end)),
            e.message().to_string(),
        )
    })?;
    let tables = |key: &str| {
        doc.get(key)
            .and_then(Item::as_array_of_tables)
            .map(|a| a.iter().collect::<Vec<_>>())
            .unwrap_or_default()
    };
    // Every `[[body]]` entry, those nested in a `target_data` or `taskgraph` body too.
    let mut bodies = tables("body");
    let mut i = 0;
    while i < bodies.len() {
        if let Some(a) = bodies[i].get("body").and_then(Item::as_array_of_tables) {
            bodies.extend(a.iter());
        }
        i += 1;
    }
    // The ranks the file asks for (1 + its largest `rank`), for the help of an error.
    let needed = tables("buffer")
        .iter()
        .chain(bodies.iter())
        .filter_map(|t| t.get("rank")?.as_integer())
        .max()
        .map_or(0, |m| m.saturating_add(1));
    for t in tables("buffer") {
        let Some(rank) = rank_of(src, t.get("rank"), ranks, needed)? else {
            continue;
        };
        let name = t.get("name").and_then(Item::as_str).unwrap_or_default();
        if let Some(id) = program.buffer_id(name) {
            dist.own_buffer(program, id, rank)
                .expect("buffer of the program, rank checked");
        }
    }
    for t in bodies {
        let Some(rank) = rank_of(src, t.get("rank"), ranks, needed)? else {
            continue;
        };
        let name = ["target", "host"]
            .iter()
            .find_map(|k| t.get(k).and_then(Item::as_str));
        if let Some(name) = name {
            dist.place(name, rank).expect("rank checked");
        }
    }
    Ok(dist)
}

/// The value of a `rank` key, checked to be an integer below `ranks`; `needed`: the
/// ranks the whole file asks for, which the error's help names.
fn rank_of(
    src: &SourceFile,
    item: Option<&Item>,
    ranks: u32,
    needed: i64,
) -> Result<Option<u32>, FileError> {
    let Some(item) = item else {
        return Ok(None);
    };
    let span = item.span().map(|r| Span::new(r.start, r.end));
    match item.as_integer() {
        Some(r) if (0..ranks as i64).contains(&r) => Ok(Some(r as u32)),
        Some(r) => Err(FileError::at(
            ErrorKind::BadValue,
            &src.path,
            &src.text,
            span,
            format!(
                "rank {r} is out of range: the run has {}",
                super::ranks_phrase(ranks)
            ),
        )
        .with_help(match r {
            r if r < 0 => "ranks count from 0".to_string(),
            r => {
                let n = needed.max(r + 1);
                format!(
                    "the file asks for {n} ranks: run it with `--ranks {n}` (or `mpirun -np \
                     {n}`), or place it on a rank below {ranks}"
                )
            }
        })),
        None => Err(FileError::at(
            ErrorKind::BadValue,
            &src.path,
            &src.text,
            span,
            "`rank` must be an integer (the rank, from 0)",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SRC: &str = "name = \"p\"\n\
        [[buffer]]\nname = \"x\"\ntype = \"f32\"\nlen = 4\nrank = 1\n\
        [[buffer]]\nname = \"y\"\ntype = \"f32\"\nlen = 4\n\
        [[body]]\ntarget = \"t\"\nkernel = \"saxpy\"\nargs = [2.0, \"x\", \"y\"]\n\
        map = [\"to: x\", \"tofrom: y\"]\nrank = 1\n";

    #[test]
    fn ranks_in_files_own_buffers_and_place_constructs() {
        let src = SourceFile::new("p.toml", SRC);
        let program = crate::file::parse(&src).unwrap();
        let d = distribution_from_source(&src, &program, 2).unwrap();
        assert_eq!(d.owner_at(crate::model::BufferId(0), 0), 1);
        assert_eq!(d.owner_at(crate::model::BufferId(1), 0), 1); // default: 1 mod 2
        assert_eq!(d.placed("t"), Some(1));
    }

    #[test]
    fn a_rank_inside_a_target_data_body_places_its_region_and_is_checked() {
        let text = "name = \"p\"\n\
            [[buffer]]\nname = \"x\"\ntype = \"f32\"\nlen = 4\n\
            [[buffer]]\nname = \"y\"\ntype = \"f32\"\nlen = 4\n\
            [[body]]\ntarget_data = \"d\"\nmap = [\"tofrom: x\", \"tofrom: y\"]\n\
            [[body.body]]\ntarget = \"t\"\nkernel = \"saxpy\"\nargs = [2.0, \"x\", \"y\"]\n\
            map = [\"to: x\", \"tofrom: y\"]\nrank = RANK\n";
        let ok = text.replace("RANK", "1");
        let src = SourceFile::new("p.toml", &ok);
        let program = crate::file::parse(&src).unwrap();
        let d = distribution_from_source(&src, &program, 2).unwrap();
        assert_eq!(d.placed("t"), Some(1));
        let bad = text.replace("RANK", "7");
        let src = SourceFile::new("p.toml", &bad);
        let program = crate::file::parse(&src).unwrap();
        let e = distribution_from_source(&src, &program, 2).unwrap_err();
        let shown = e.render();
        assert!(
            shown.starts_with("p.toml:18:8: error: rank 7 is out of range"),
            "{shown}"
        );
    }

    #[test]
    fn a_rank_out_of_range_is_located() {
        let src = SourceFile::new(
            "p.toml",
            SRC.replace("rank = 1\n[[buffer]]", "rank = 5\n[[buffer]]"),
        );
        let program = crate::file::parse(&src).unwrap();
        let e = distribution_from_source(&src, &program, 2).unwrap_err();
        assert!(
            e.render().starts_with(
                "p.toml:6:8: error: rank 5 is out of range: the run has 2 ranks (ranks 0 to 1)"
            ),
            "{}",
            e.render()
        );
        assert!(
            e.render().contains(
                "help: the file asks for 6 ranks: run it with `--ranks 6` (or `mpirun -np 6`)"
            ),
            "{}",
            e.render()
        );
        let src = SourceFile::new("p.toml", SRC.replacen("rank = 1", "rank = \"one\"", 1));
        let e = distribution_from_source(&src, &crate::file::parse(&src).unwrap(), 2).unwrap_err();
        assert!(
            e.render().contains("`rank` must be an integer"),
            "{}",
            e.render()
        );
    }
}
