//! The mapping table (in progress).
use super::AllocId;
use crate::model::Section;
/// A live mapping.
#[derive(Clone, Debug, PartialEq)]
pub struct MapEntry {
    pub section: Section,
    pub alloc: AllocId,
    pub refcount: u32,
}
/// Per-device table of live mappings.
#[derive(Clone, Debug, Default)]
pub struct MappingTable {
    pub entries: Vec<MapEntry>,
}
