//! The store's memory: how much the process may use ([`available`]), and the governor that
//! splits the store's share among its roles (memtables, block cache, index partitions,
//! filters) and moves memory between them as the lookups show where it saves the most reads
//! (`docs/design.md`, "Memory"). [`crate::Stats::memory`] reports one row per role.
//!
//! Beside them, the process allocator's habits that keep freed memory resident
//! (`allocator`).

pub(crate) mod allocator;
mod governor;
mod limit;

pub(crate) use governor::{Counted, Given, Governor, Reading};
pub use governor::{MemoryRole, RoleMemory};
pub use limit::{available, find_cgroups, Found, Hierarchy};
