//! The lowering pass (in progress).
use super::{LowerError, OpGraph};
use crate::model::Program;
pub(super) struct Lowerer<'a> {
    p: &'a Program,
}
impl<'a> Lowerer<'a> {
    pub(super) fn new(p: &'a Program) -> Self {
        Lowerer { p }
    }
    pub(super) fn run(self) -> Result<OpGraph, LowerError> {
        Ok(OpGraph::new(&self.p.name, self.p.buffers.clone(), self.p.kernels.clone(), self.p.devices))
    }
}
