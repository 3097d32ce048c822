//! IDENTITY state: values handed out, explicit values observed, reseeds.

use super::*;

impl Catalog {
    /// Hands out the next identity value (seed first, then last + increment).
    /// `None` when the table has no identity column.
    pub fn identity_next(&mut self, object_id: i32) -> Option<i64> {
        let state = self.tables.get_mut(&object_id)?.identity.as_mut()?;
        let value = state.peek();
        state.last = Some(value);
        self.touch();
        Some(value)
    }

    /// An explicit value inserted under IDENTITY_INSERT: moves the identity forward (in the
    /// increment's direction) when the value is beyond the last one.
    pub fn identity_observe(&mut self, object_id: i32, value: i64) {
        let Some(state) = self.tables.get_mut(&object_id).and_then(|t| t.identity.as_mut()) else {
            return;
        };
        let beyond = match state.last {
            None => true,
            Some(last) => (state.increment > 0 && value > last) || (state.increment < 0 && value < last),
        };
        if beyond {
            state.last = Some(value);
            state.fresh_start = None;
            self.touch();
        }
    }

    /// Same as [`Catalog::identity_observe`] (the name the engine's brief used).
    pub fn identity_set_last(&mut self, object_id: i32, value: i64) {
        self.identity_observe(object_id, value);
    }

    /// DBCC CHECKIDENT RESEED. `Some(n)`: the next value is n + increment, or n itself when no
    /// row was ever inserted (or after TRUNCATE). `None`: back to the seed with no history, as
    /// TRUNCATE TABLE does. (A bare `RESEED` uses the column's current maximum: the engine
    /// computes it and passes `Some(max)`.)
    pub fn identity_reseed(&mut self, object_id: i32, value: Option<i64>) {
        let Some(state) = self.tables.get_mut(&object_id).and_then(|t| t.identity.as_mut()) else {
            return;
        };
        match value {
            Some(n) if state.last.is_some() => {
                state.last = Some(n);
            }
            Some(n) => state.fresh_start = Some(n),
            None => {
                state.last = None;
                state.fresh_start = None;
            }
        }
        self.touch();
    }

    /// TRUNCATE TABLE: the identity starts over at its seed.
    pub fn truncate(&mut self, object_id: i32) {
        self.identity_reseed(object_id, None);
    }

    /// IDENT_CURRENT: the last value handed out, or the seed (or reseed value) before the first.
    pub fn identity_current(&self, object_id: i32) -> Option<i64> {
        let state = self.tables.get(&object_id)?.identity.as_ref()?;
        Some(state.last.or(state.fresh_start).unwrap_or(state.seed))
    }
}
