//! An existing PostgreSQL target table as its catalog describes it: columns with their types,
//! primary key, row estimate, and what outside the migration depends on it. Reads only.

use crate::preflight::target_tables::{Dependent, ExistingColumn, ExistingTable, TypeFit};
use crate::schema::mssql_to_pg_types::PgType;
use tokio_postgres::Client;

/// Reads `qualified` (a quoted `"schema"."table"`), or `None` when it does not exist.
/// `migrated` are the quoted names of every table and view of the plan: their foreign keys to
/// each other and the views over them are the migration's own, not dependents.
pub async fn existing_table(
    pg: &Client,
    qualified: &str,
    migrated: &[String],
) -> Result<Option<ExistingTable>, tokio_postgres::Error> {
    let exists: bool = pg
        .query_one("SELECT to_regclass($1) IS NOT NULL", &[&qualified])
        .await?
        .get(0);
    if !exists {
        return Ok(None);
    }
    let rows_estimate: Option<i64> = pg
        .query_one(
            "SELECT CASE WHEN reltuples < 0 THEN NULL ELSE reltuples::bigint END \
             FROM pg_class WHERE oid = $1::text::regclass",
            &[&qualified],
        )
        .await?
        .get(0);
    let columns = pg
        .query(
            // A domain column (a SQL Server alias type) stores its base type.
            "SELECT a.attname::text, \
                    CASE WHEN ty.typtype = 'd' THEN format_type(ty.typbasetype, ty.typtypmod) \
                         ELSE format_type(a.atttypid, a.atttypmod) END, a.attnotnull, \
                    a.atthasdef OR a.attidentity <> '' OR a.attgenerated <> '' \
             FROM pg_attribute a JOIN pg_type ty ON ty.oid = a.atttypid \
             WHERE a.attrelid = $1::text::regclass AND a.attnum > 0 AND NOT a.attisdropped \
             ORDER BY a.attnum",
            &[&qualified],
        )
        .await?
        .iter()
        .map(|r| ExistingColumn {
            name: r.get(0),
            type_name: r.get(1),
            not_null: r.get(2),
            filled_by_server: r.get(3),
        })
        .collect();
    let primary_key = pg
        .query(
            "SELECT a.attname::text \
             FROM pg_constraint c \
             CROSS JOIN LATERAL unnest(c.conkey) WITH ORDINALITY AS k(attnum, ord) \
             JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.attnum \
             WHERE c.conrelid = $1::text::regclass AND c.contype = 'p' ORDER BY k.ord",
            &[&qualified],
        )
        .await?
        .iter()
        .map(|r| r.get(0))
        .collect();
    Ok(Some(ExistingTable {
        name: qualified.to_string(),
        rows_estimate,
        columns,
        primary_key,
        dependents: dependents(pg, qualified, migrated).await?,
    }))
}

/// Views (and views on those views) over the table, and foreign keys of tables outside the
/// migration that reference it: what `DROP TABLE ... CASCADE` would silently take along.
async fn dependents(
    pg: &Client,
    qualified: &str,
    migrated: &[String],
) -> Result<Vec<Dependent>, tokio_postgres::Error> {
    let views = pg
        .query(
            "WITH RECURSIVE deps(oid) AS ( \
                SELECT r.ev_class FROM pg_depend d JOIN pg_rewrite r ON r.oid = d.objid \
                WHERE d.classid = 'pg_rewrite'::regclass AND d.refclassid = 'pg_class'::regclass \
                  AND d.refobjid = $1::text::regclass AND r.ev_class <> d.refobjid \
                UNION \
                SELECT r.ev_class FROM deps JOIN pg_depend d ON d.refobjid = deps.oid \
                  AND d.refclassid = 'pg_class'::regclass AND d.classid = 'pg_rewrite'::regclass \
                JOIN pg_rewrite r ON r.oid = d.objid WHERE r.ev_class <> deps.oid) \
             SELECT CASE c.relkind WHEN 'm' THEN 'materialized view' ELSE 'view' END, \
                    n.nspname::text, c.relname::text, pg_get_viewdef(c.oid) \
             FROM (SELECT DISTINCT oid FROM deps) d JOIN pg_class c ON c.oid = d.oid \
             JOIN pg_namespace n ON n.oid = c.relnamespace \
             WHERE c.oid <> ALL (SELECT to_regclass(m) FROM unnest($2::text[]) AS m \
                                 WHERE to_regclass(m) IS NOT NULL) \
             ORDER BY 2, 3",
            &[&qualified, &migrated],
        )
        .await?;
    // With only pg_catalog on the search path, pg_get_constraintdef qualifies the referenced
    // table: the clause recreates the foreign key whatever the search path of finalize's session.
    pg.batch_execute("SET search_path = pg_catalog").await?;
    let fks = pg
        .query(
            "SELECT n.nspname::text, r.relname::text, c.conname::text, pg_get_constraintdef(c.oid) \
             FROM pg_constraint c JOIN pg_class r ON r.oid = c.conrelid \
             JOIN pg_namespace n ON n.oid = r.relnamespace \
             WHERE c.contype = 'f' AND c.confrelid = $1::text::regclass AND c.conrelid <> c.confrelid \
               AND c.conrelid <> ALL (SELECT to_regclass(m) FROM unnest($2::text[]) AS m \
                                      WHERE to_regclass(m) IS NOT NULL) \
             ORDER BY 1, 2, 3",
            &[&qualified, &migrated],
        )
        .await;
    pg.batch_execute("RESET search_path").await?;
    let fks = fks?;
    Ok(views
        .iter()
        .map(|r| Dependent {
            kind: r.get(0),
            schema: r.get(1),
            relation: r.get(2),
            constraint: None,
            definition: r.get(3),
        })
        .chain(fks.iter().map(|r| Dependent {
            kind: "foreign key".into(),
            schema: r.get(0),
            relation: r.get(1),
            constraint: Some(r.get(2)),
            definition: r.get(3),
        }))
        .collect())
}

/// A type as `format_type` prints it: the name without its modifiers, and the modifiers.
fn parse_format_type(s: &str) -> (String, Vec<u32>) {
    let Some(open) = s.find('(') else {
        return (s.to_string(), Vec::new());
    };
    let close = s[open..].find(')').map_or(s.len(), |c| open + c);
    let args = s[open + 1..close]
        .split(',')
        .filter_map(|a| a.trim().parse().ok())
        .collect();
    let base = format!("{}{}", s[..open].trim_end(), &s[(close + 1).min(s.len())..]);
    (base, args)
}

/// `PgType` as `format_type` spells it.
fn catalog_form(t: PgType) -> (&'static str, Vec<u32>) {
    match t {
        PgType::Bool => ("boolean", vec![]),
        PgType::Int2 => ("smallint", vec![]),
        PgType::Int4 => ("integer", vec![]),
        PgType::Int8 => ("bigint", vec![]),
        PgType::Numeric { precision, scale } => ("numeric", vec![precision.into(), scale.into()]),
        PgType::Float4 => ("real", vec![]),
        PgType::Float8 => ("double precision", vec![]),
        PgType::Date => ("date", vec![]),
        PgType::Time { precision } => ("time without time zone", vec![precision.into()]),
        PgType::Timestamp { precision } => ("timestamp without time zone", vec![precision.into()]),
        PgType::Timestamptz { precision } => ("timestamp with time zone", vec![precision.into()]),
        PgType::Uuid => ("uuid", vec![]),
        PgType::Varchar { length } => ("character varying", vec![length]),
        PgType::Char { length } => ("character", vec![length]),
        PgType::Text => ("text", vec![]),
        PgType::Bytea => ("bytea", vec![]),
        PgType::Xml => ("xml", vec![]),
    }
}

/// Whether an existing column of type `found` stores the values of a planned `PgType` column
/// unchanged when loaded with the planned binary COPY encoding.
///
/// Widenings allowed are the ones whose binary form is the planned one's: longer or unbounded
/// text, more precision with the same scale, more fractional-second digits. Other types (an
/// `integer` into `bigint` included) are refused: binary COPY sends a fixed width per type.
pub fn pg_type_fit(planned: PgType, found: &str) -> TypeFit {
    let (want, want_args) = catalog_form(planned);
    let (base, args) = parse_format_type(found);
    if base == want && args == want_args {
        return TypeFit::Exact;
    }
    let widening = match planned {
        PgType::Varchar { length } | PgType::Char { length } => {
            base == "text" || (base == "character varying" && args.first().is_none_or(|m| *m >= length))
        }
        PgType::Text => base == "character varying" && args.is_empty(),
        PgType::Numeric { precision, scale } => {
            base == "numeric"
                && (args.is_empty()
                    || (args.len() == 2 && args[1] == u32::from(scale) && args[0] >= u32::from(precision)))
        }
        PgType::Time { precision } | PgType::Timestamp { precision } | PgType::Timestamptz { precision } => {
            base == want && args.first().is_none_or(|q| *q >= u32::from(precision))
        }
        _ => false,
    };
    if widening { TypeFit::Widening } else { TypeFit::No }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_types_in_the_catalogs_spelling() {
        assert_eq!(pg_type_fit(PgType::Int4, "integer"), TypeFit::Exact);
        assert_eq!(
            pg_type_fit(
                PgType::Timestamp { precision: 3 },
                "timestamp(3) without time zone"
            ),
            TypeFit::Exact
        );
        assert_eq!(
            pg_type_fit(PgType::Varchar { length: 40 }, "character varying(40)"),
            TypeFit::Exact
        );
        assert_eq!(
            pg_type_fit(
                PgType::Numeric {
                    precision: 19,
                    scale: 4
                },
                "numeric(19,4)"
            ),
            TypeFit::Exact
        );
    }

    #[test]
    fn widenings_that_keep_every_value() {
        let v = PgType::Varchar { length: 40 };
        assert_eq!(pg_type_fit(v, "character varying(80)"), TypeFit::Widening);
        assert_eq!(pg_type_fit(v, "character varying"), TypeFit::Widening);
        assert_eq!(pg_type_fit(v, "text"), TypeFit::Widening);
        assert_eq!(pg_type_fit(v, "character varying(20)"), TypeFit::No);
        let n = PgType::Numeric {
            precision: 10,
            scale: 2,
        };
        assert_eq!(pg_type_fit(n, "numeric(12,2)"), TypeFit::Widening);
        assert_eq!(pg_type_fit(n, "numeric"), TypeFit::Widening);
        assert_eq!(pg_type_fit(n, "numeric(12,3)"), TypeFit::No);
        assert_eq!(
            pg_type_fit(PgType::Timestamp { precision: 3 }, "timestamp without time zone"),
            TypeFit::Widening
        );
        assert_eq!(
            pg_type_fit(
                PgType::Timestamp { precision: 6 },
                "timestamp(3) without time zone"
            ),
            TypeFit::No
        );
    }

    #[test]
    fn other_types_are_refused() {
        assert_eq!(pg_type_fit(PgType::Int4, "real"), TypeFit::No);
        assert_eq!(pg_type_fit(PgType::Int4, "bigint"), TypeFit::No);
        assert_eq!(
            pg_type_fit(PgType::Timestamp { precision: 6 }, "date"),
            TypeFit::No
        );
        assert_eq!(
            pg_type_fit(PgType::Timestamp { precision: 6 }, "timestamp(6) with time zone"),
            TypeFit::No
        );
    }
}
