//! linear page table (stub: to be implemented).

use super::{PageTableConfig, ParamError, Pte, PtSize, WalkEnv, WalkRecord};
use crate::addr::{Asid, PageSize, Vpn};

/// linear page table.
#[derive(Clone, Debug)]
pub struct LinearTable {}

impl LinearTable {
    /// Builds the table.
    pub fn new(_cfg: &PageTableConfig, _page_size: PageSize) -> Result<Self, ParamError> {
        todo!()
    }
    /// See [`super::PageTable::map`].
    pub fn map(&mut self, _asid: Asid, _vpn: Vpn, _pte: Pte) {
        todo!()
    }
    /// See [`super::PageTable::unmap`].
    pub fn unmap(&mut self, _asid: Asid, _vpn: Vpn) -> Option<Pte> {
        todo!()
    }
    /// See [`super::PageTable::get`].
    pub fn get(&self, _asid: Asid, _vpn: Vpn) -> Option<Pte> {
        todo!()
    }
    /// See [`super::PageTable::walk`].
    pub fn walk<E: WalkEnv>(&mut self, _asid: Asid, _vpn: Vpn, _env: &mut E, _rec: &mut WalkRecord) -> Option<Pte> {
        todo!()
    }
    /// See [`super::PageTable::remove_asid`].
    pub fn remove_asid(&mut self, _asid: Asid) {
        todo!()
    }
    /// See [`super::PageTable::size`].
    pub fn size(&self) -> PtSize {
        todo!()
    }
}
