//! Change Tracking's SQLite side: the versions, commit times and change records
//! ([`side`]) and `CHANGETABLE(CHANGES ...)` over them ([`changes`]). The statements that switch
//! it on and off and the retention clean-up are `crate::ddl::change_tracking`; the settings live
//! in the catalog.

pub(crate) mod changes;
pub(crate) mod side;

use crate::catalog::Catalog;

/// TRUNCATE TABLE of a tracked table: its history restarts at `version` (the current one), as
/// if tracking had just been enabled.
pub(crate) fn restart_history(c: &mut Catalog, object_id: i32, version: i64) {
    if let Some(t) = c.change_tracking_mut().tables.get_mut(&object_id) {
        t.min_valid_version = version;
        t.begin_version = version;
    }
}
