"""Trials for foreign keys, unique keys (primary keys, UNIQUE constraints, unique indexes) and
defaults, built from the SQL Server side's catalog: each a statement (after setup statements) in
both dialects, run inside a transaction that is rolled back (trial_exec.py), and what the source is
expected to do with it.

- Foreign keys: an existing child row (one no other row points at, or a made-up row of an empty
  table) is pointed at another existing parent (accepted), at a missing one (refused by the FK), at
  NULL where a column allows it (accepted); a parent row some child points at is deleted and its
  key updated: NO ACTION refuses (SQL Server refuses any update of an identity column first),
  CASCADE removes the children, SET NULL/SET DEFAULT leave them pointing nowhere; the query after
  it counts the children still pointing at the old key.
- Unique keys: an existing row no other row points at is given the key of another row (refused),
  of a row with NULLs in the key's nullable columns (SQL Server treats NULLs as equal), and a key
  no row has (accepted). Keys over identity or computed columns are not UPDATEd (SQL Server
  cannot); those are counted as skipped.
- Defaults: a row (one no other row points at) is deleted and inserted again without its
  defaulted columns (a made-up row for an empty table); the defaulted columns are read back.
"""
import dataclasses
import datetime as dt
import decimal
import uuid

from canon import family
from trial_rows import insert, literal, update, where


@dataclasses.dataclass
class Trial:
    kind: str  # "fk", "fk-action", "unique", "default"
    name: str  # the constraint (or table.column list for defaults)
    what: str  # one line: what the trial does
    expect: str  # at the source: "accept", "refuse", or for actions the FK's action
    ms: tuple  # (setup, stmt, query)
    pg: tuple
    columns: list = dataclasses.field(default_factory=list)  # defaults: the columns read back
    definitions: list = dataclasses.field(default_factory=list)  # defaults: their definitions
    old: dict = dataclasses.field(default_factory=dict)  # defaults: the row's values before


@dataclasses.dataclass
class ForeignKey:
    name: str
    table: object
    ref: object
    columns: list  # [(child Column, parent Column)]
    on_delete: str
    on_update: str
    not_trusted: bool
    disabled: bool


class Catalog:
    """What the trials need of the SQL Server side's catalog and data."""

    def __init__(self, ms, tables, made_up):
        self.ms = ms
        self.tables = {t.qualified.lower(): t for t in tables}
        self.made_up = made_up
        self.fks = []
        for fk_id, name, parent, ref, on_delete, on_update, not_trusted, disabled in ms.query(
                "SELECT fk.object_id, fk.name, "
                "OBJECT_SCHEMA_NAME(fk.parent_object_id) + '.' + OBJECT_NAME(fk.parent_object_id), "
                "OBJECT_SCHEMA_NAME(fk.referenced_object_id) + '.' + OBJECT_NAME(fk.referenced_object_id), "
                "fk.delete_referential_action_desc, fk.update_referential_action_desc, fk.is_not_trusted, "
                "fk.is_disabled FROM sys.foreign_keys fk ORDER BY 2"):
            t, r = self.tables.get(parent.lower()), self.tables.get(ref.lower())
            if t is None or r is None:
                continue
            cols = ms.query(
                "SELECT pc.name, rc.name FROM sys.foreign_key_columns k "
                "JOIN sys.columns pc ON pc.object_id = k.parent_object_id AND pc.column_id = k.parent_column_id "
                "JOIN sys.columns rc ON rc.object_id = k.referenced_object_id AND rc.column_id = k.referenced_column_id "
                f"WHERE k.constraint_object_id = {int(fk_id)} ORDER BY k.constraint_column_id")
            self.fks.append(ForeignKey(name, t, r, [(t.column(a), r.column(b)) for a, b in cols],
                                       on_delete, on_update, bool(not_trusted), bool(disabled)))
        self.uniques = []  # (name, table, [Column], is_primary_key, filter or None)
        rows = ms.query(
            "SELECT i.object_id, i.index_id, i.name, OBJECT_SCHEMA_NAME(i.object_id) + '.' + OBJECT_NAME(i.object_id), "
            "i.is_primary_key, i.filter_definition FROM sys.indexes i JOIN sys.tables t ON t.object_id = i.object_id "
            "WHERE i.is_unique = 1 ORDER BY 4, 3")
        for obj, index_id, name, table, pk, filt in rows:
            t = self.tables.get(table.lower())
            if t is None:
                continue
            cols = [t.column(r[0]) for r in ms.query(
                "SELECT c.name FROM sys.index_columns ic JOIN sys.columns c ON c.object_id = ic.object_id "
                f"AND c.column_id = ic.column_id WHERE ic.object_id = {int(obj)} AND ic.index_id = {int(index_id)} "
                "AND ic.is_included_column = 0 ORDER BY ic.key_ordinal")]
            self.uniques.append((name, t, cols, bool(pk), filt))
        self.defaults = {}  # table -> [(Column, definition)]
        for table, col, definition in ms.query(
                "SELECT OBJECT_SCHEMA_NAME(d.parent_object_id) + '.' + OBJECT_NAME(d.parent_object_id), c.name, "
                "d.definition FROM sys.default_constraints d JOIN sys.columns c ON c.object_id = d.parent_object_id "
                "AND c.column_id = d.parent_column_id ORDER BY 1, 2"):
            t = self.tables.get(table.lower())
            if t is None:  # the worker's own bookkeeping (_mssqlpg)
                continue
            self.defaults.setdefault(t.qualified.lower(), []).append((t.column(col), definition))
        self.max_chars = {}
        for table, col, max_length, type_name in ms.query(
                "SELECT OBJECT_SCHEMA_NAME(c.object_id) + '.' + OBJECT_NAME(c.object_id), c.name, c.max_length, "
                "TYPE_NAME(c.system_type_id) FROM sys.columns c JOIN sys.tables t ON t.object_id = c.object_id"):
            if max_length and max_length > 0:
                chars = max_length // 2 if (type_name or "").lower().startswith("n") else max_length
                self.max_chars[(table.lower(), col.lower())] = chars
        self._empty = {}

    def is_empty(self, t):
        if t.qualified not in self._empty:
            self._empty[t.qualified] = self.made_up.is_empty(t)
        return self._empty[t.qualified]

    def referencing(self, t):
        return [fk for fk in self.fks if fk.ref is t]

    def not_pointed_at(self, t, alias="x", columns=None):
        """WHERE conditions: no row of another table (through an enabled FK; one over any of
        `columns`, when given) points at row `alias` of `t`."""
        out = []
        names = {c.name.lower() for c in columns} if columns is not None else None
        for i, fk in enumerate(self.referencing(t)):
            if fk.disabled or (names is not None and not names & {p.name.lower() for _, p in fk.columns}):
                continue
            on = " AND ".join(f"r{i}.{self.ms.quote(c.name)} = {alias}.{self.ms.quote(p.name)}" for c, p in fk.columns)
            out.append(f"NOT EXISTS (SELECT 1 FROM {self.ms.qname(fk.table)} r{i} WHERE {on})")
        return out

    def rows(self, t, conditions=(), order="", top=1):
        """Rows of `t` as {column name lower: value} (computed columns left out)."""
        cols = [c for c in t.columns if not c.computed]
        cond = " AND ".join(conditions)
        keys = ", ".join(f"x.{self.ms.quote(c)}" for c in t.key) or "1"
        sql = (f"SELECT TOP {int(top)} {', '.join('x.' + s for s in self.ms.select_list(t, cols).split(', '))} "
               f"FROM {self.ms.qname(t)} x{' WHERE ' + cond if cond else ''} ORDER BY {order or keys}")
        return [{c.name.lower(): v for c, v in zip(cols, r)} for r in self.ms.query(sql)]

    def chars(self, t, col):
        return self.max_chars.get((t.qualified.lower(), col.name.lower()))

    def absent(self, t, col, fresh_from=None):
        """A value of `col`'s type that no row of `t` holds (None when none is found)."""
        fam = family(col)
        q = self.ms.quote(col.name)
        if fam in ("int", "exact"):
            # (an empty table's made-up rows use 1 and 3)
            top = self.ms.query(f"SELECT MAX({q}) FROM {self.ms.qname(t)}")[0][0]
            return (top if top is not None else 3) + 1
        if fam == "uuid":
            return uuid.uuid4()
        if fam in ("timestamp", "date"):
            # Before the earliest: CHECKs such as EndDate >= StartDate still hold.
            low = self.ms.query(f"SELECT MIN({q}) FROM {self.ms.qname(t)}")[0][0] or dt.datetime(2020, 1, 1)
            return low - dt.timedelta(days=1)
        if col.type == "hierarchyid":
            # Children of the root no row has (compared as text: the ToString() form is the one
            # both sides hold).
            candidates = ["/4001/", "/4002/", "/4003/"]
            q = f"{q}.ToString()"
        elif fam == "time":
            candidates = [dt.time(3, 17, 0), dt.time(4, 41, 0)]
        elif fam == "text":
            n = self.chars(t, col) or 3
            candidates = [s[:n] for s in ("~t", "~u", "~v")]
        else:
            return None
        for v in candidates:
            n = self.ms.query(f"SELECT COUNT(*) FROM {self.ms.qname(t)} WHERE {q} = {literal('mssql', col, v)}")[0][0]
            if not n:
                return v
        return None


def _key_values(t, row):
    return [(t.column(k), row.get(k.lower())) for k in t.key]


def _pair(ms, pg, t, tp, assignment, key_values):
    return update(ms, t, key_values, assignment), update(pg, tp, key_values, assignment)


def _setup_made_up(cat, ms, pg, pg_tables, t):
    values, parents = cat.made_up.row(t)
    ms_setup, pg_setup = [], []
    for pt, pv in parents + [(t, values)]:
        ms_setup += insert(ms, pt, pv)
        pg_setup += insert(pg, pg_tables(pt), pv)
    return {c.name.lower(): v for c, v in values}, ms_setup, pg_setup


def _count_pointing(side, fk, table, values):
    """SELECT COUNT(*) of the children still pointing at the parent key `values`."""
    key = list(zip([c for c, _ in fk.columns], values))
    return f"SELECT COUNT(*) FROM {side.qname(table)} WHERE {where(side, table, key)}"


def fk_trials(cat, ms, pg, pg_tables):
    """(trials, skipped lines)."""
    trials, skipped = [], []
    for fk in cat.fks:
        if fk.disabled:
            skipped.append(f"{fk.name}: disabled at the source (enforces nothing)")
            continue
        t, tp, r = fk.table, pg_tables(fk.table), fk.ref
        rp = pg_tables(r)
        child_cols = [c for c, _ in fk.columns]
        # The child row.
        if cat.is_empty(t):
            row, ms_setup, pg_setup = _setup_made_up(cat, ms, pg, pg_tables, t)
        else:
            not_null = [f"x.{ms.quote(c.name)} IS NOT NULL" for c in child_cols]
            found = (cat.rows(t, not_null + cat.not_pointed_at(t)) or cat.rows(t, not_null))
            if not found:
                skipped.append(f"{fk.name}: no row of {t.qualified} points anywhere")
                continue
            row, ms_setup, pg_setup = found[0], [], []
        key_values = _key_values(t, row)
        current = tuple(row.get(c.name.lower()) for c in child_cols)
        ref_cols = ", ".join(ms.quote(p.name) for _, p in fk.columns)
        # A parent no child points at yet first (the FK's columns may be a key of the child), then any.
        unused = " AND ".join(f"y.{ms.quote(c.name)} = p.{ms.quote(pc.name)}" for c, pc in fk.columns)
        select = ", ".join("p." + s for s in ms.select_list(r, [pc for _, pc in fk.columns]).split(", "))
        others = [tuple(x) for x in ms.query(
            f"SELECT TOP 1 {select} FROM {ms.qname(r)} p WHERE NOT EXISTS (SELECT 1 FROM {ms.qname(t)} y "
            f"WHERE {unused}) ORDER BY {ref_cols.replace('[', 'p.[')}")]
        others += [tuple(x) for x in ms.query(f"SELECT TOP 3 {ms.select_list(r, [p for _, p in fk.columns])} "
                                              f"FROM {ms.qname(r)} ORDER BY {ref_cols} DESC")]
        others = list(dict.fromkeys(o for o in others if o != current))[:2]
        for o in others:
            assignment = list(zip(child_cols, o))
            ms_stmt, pg_stmt = _pair(ms, pg, t, tp, assignment, key_values)
            trials.append(Trial("fk", fk.name, f"{t.qualified} ({_show(assignment)}): an existing parent", "accept",
                                (ms_setup, ms_stmt, None), (pg_setup, pg_stmt, None)))
        missing = cat.absent(r, fk.columns[0][1])
        if missing is not None:
            first = others[0] if others else current
            assignment = [(child_cols[0], missing)] + list(zip(child_cols[1:], first[1:]))
            ms_stmt, pg_stmt = _pair(ms, pg, t, tp, assignment, key_values)
            trials.append(Trial("fk", fk.name, f"{t.qualified} ({_show(assignment)}): a missing parent", "refuse",
                                (ms_setup, ms_stmt, None), (pg_setup, pg_stmt, None)))
        else:
            skipped.append(f"{fk.name}: no value missing from {r.qualified} found")
        for c in child_cols:
            if c.nullable:
                ms_stmt, pg_stmt = _pair(ms, pg, t, tp, [(c, None)], key_values)
                trials.append(Trial("fk", fk.name, f"{t.qualified} ({c.name} = NULL)", "accept",
                                    (ms_setup, ms_stmt, None), (pg_setup, pg_stmt, None)))
        # The parent side: delete and re-key a parent this child row points at.
        if any(v is None for v in current):
            continue
        parent_where = [(p, v) for (_, p), v in zip(fk.columns, current)]
        for verb in ("DELETE", "UPDATE"):
            action = fk.on_delete if verb == "DELETE" else fk.on_update
            if verb == "DELETE":
                ms_stmt = f"DELETE FROM {ms.qname(r)} WHERE {where(ms, r, parent_where)}"
                pg_stmt = f"DELETE FROM {pg.qname(rp)} WHERE {where(pg, rp, parent_where)}"
            else:
                new = cat.absent(r, fk.columns[0][1])
                if new is None:
                    continue
                ms_stmt = update(ms, r, parent_where, [(fk.columns[0][1], new)])
                pg_stmt = update(pg, rp, parent_where, [(fk.columns[0][1], new)])
            trials.append(Trial("fk-action", fk.name,
                                f"{verb} of the parent {r.qualified} ({_show(parent_where)}), ON {verb} {action}",
                                action, (ms_setup, ms_stmt, _count_pointing(ms, fk, t, current)),
                                (pg_setup, pg_stmt, _count_pointing(pg, fk, tp, current))))
    return trials, skipped


def unique_trials(cat, ms, pg, pg_tables):
    trials, skipped = [], []
    for name, t, cols, _pk, filt in cat.uniques:
        tp = pg_tables(t)
        if any(c.computed for c in cols):
            skipped.append(f"{name}: over a computed column (not UPDATEd; the index's presence is compared)")
            continue
        if any(c.identity for c in cols):
            # SQL Server cannot UPDATE an identity column: INSERTs of a copy of a row instead.
            trials_or_why = identity_key_trials(cat, ms, pg, t, tp, name, cols)
            if isinstance(trials_or_why, str):
                skipped.append(f"{name}: {trials_or_why}")
            else:
                trials += trials_or_why
            continue
        if cat.is_empty(t):
            skipped.append(f"{name}: {t.qualified} is empty (presence compared)")
            continue
        cond = [f"({filt})"] if filt else []
        # The duplicate copies the whole of the other row but its other unique keys (so that the
        # row's CHECKs across columns still hold and only this key is violated).
        other_keys = {c.name.lower() for n2, t2, cols2, _, _ in cat.uniques if t2 is t and n2 != name for c in cols2}
        copied = [c for c in t.columns if not (c.identity or c.computed)
                  and (c in cols or c.name.lower() not in other_keys)]
        # Only the columns other tables point at need a row nobody points at.
        movable = cat.rows(t, cond + cat.not_pointed_at(t, columns=copied))
        if not movable:
            skipped.append(f"{name}: every row of {t.qualified} is pointed at by another table")
            continue
        b = movable[0]
        b_key = _key_values(t, b)
        bq = where(ms, t, b_key)
        others = cat.rows(t, cond + [f"NOT ({bq})"], top=1)
        nullable = [c for c in cols if c.nullable]
        if nullable:
            nulls = " + ".join(f"CASE WHEN x.{ms.quote(c.name)} IS NULL THEN 1 ELSE 0 END" for c in nullable)
            with_nulls = cat.rows(t, cond + [f"NOT ({bq})", f"({nulls}) > 0"], order=f"{nulls} DESC", top=1)
            others += [r for r in with_nulls if r not in others]
        for a in others:
            assignment = [(c, a.get(c.name.lower())) for c in copied]
            ms_stmt, pg_stmt = _pair(ms, pg, t, tp, assignment, b_key)
            label = "another row's key" + (" with NULLs" if any(v is None for c, v in assignment if c in cols) else "")
            trials.append(Trial("unique", name, f"{t.qualified} ({_show(assignment)}): {label}", "refuse",
                                ([], ms_stmt, None), ([], pg_stmt, None)))
        if nullable and not any(any(a.get(c.name.lower()) is None for c in nullable) for a in others) and others:
            # No row has a NULL there: make one first, then copy its key.
            a = others[0]
            n = nullable[0]
            a_key = _key_values(t, a)
            assignment = [(c, None if c is n else a.get(c.name.lower())) for c in copied]
            ms_stmt, pg_stmt = _pair(ms, pg, t, tp, assignment, b_key)
            ms_setup, pg_setup = _pair(ms, pg, t, tp, [(n, None)], a_key)
            trials.append(Trial("unique", name, f"{t.qualified} ({_show(assignment)}): another row's key with "
                                                 f"NULL (made so first)", "refuse",
                                ([ms_setup], ms_stmt, None), ([pg_setup], pg_stmt, None)))
        fresh = fresh_value(cat, t, cols, b)
        if fresh is None:
            skipped.append(f"{name}: no key value unused in {t.qualified} found (the refusals are still tried)")
            continue
        ms_stmt, pg_stmt = _pair(ms, pg, t, tp, [fresh], b_key)
        trials.append(Trial("unique", name, f"{t.qualified} ({_show([fresh])}): a key no row has", "accept",
                            ([], ms_stmt, None), ([], pg_stmt, None)))
    return trials, skipped


NOW = ("getdate", "sysdatetime", "getutcdate", "sysutcdatetime", "current_timestamp", "sysdatetimeoffset")
UUID_FUNCS = ("newid", "newsequentialid")


def default_kind(definition):
    d = definition.lower()
    if any(f in d for f in NOW):
        return "now"
    if any(f in d for f in UUID_FUNCS):
        return "uuid"
    return "value"


def identity_key_trials(cat, ms, pg, t, tp, name, cols):
    """A copy of a row with its other unique keys made new: inserted with the row's own identity
    value (refused by the key), and with none, the table's next one (accepted: on PostgreSQL only
    if the migration moved the identity's sequence past the copied rows)."""
    if cat.is_empty(t):
        return f"{t.qualified} is empty (presence compared)"
    first = cat.rows(t)[0]
    copy = fresh_copy(cat, t, first)
    if copy is None:
        return "no new value found for another unique key of the copy"
    ident = next(c for c in cols if c.identity)
    out = []
    for label, expect, values in (("a copy of a row with its identity value", "refuse",
                                   dict(copy, **{ident.name.lower(): first[ident.name.lower()]})),
                                  ("a copy of a row with the next identity value", "accept", copy)):
        row = [(c, values[c.name.lower()]) for c in t.columns if c.name.lower() in values]
        ms_stmts, pg_stmts = insert(ms, t, row), insert(pg, tp, row)
        ms_trial = (ms_stmts[:1], ms_stmts[1], None) if len(ms_stmts) > 1 else ([], ms_stmts[0], None)
        out.append(Trial("unique", name, f"INSERT into {t.qualified}: {label} "
                                         f"({ident.name} = {values.get(ident.name.lower(), 'next')})",
                         expect, ms_trial, ([], pg_stmts[0], None)))
    return out


def fresh_value(cat, t, cols, row):
    """(column, value) that makes `row`'s key over `cols` one no row of `t` has: a value no row
    holds in a column no FK covers (numbers last), or another parent's key in a single-column FK's
    column that no row combines with the row's other key values. None when none is found."""
    ms = cat.ms
    fk_cols = {c.name.lower() for fk in cat.fks if fk.table is t for c, _ in fk.columns}
    free = [c for c in cols if c.name.lower() not in fk_cols and not c.identity and not c.computed]
    # Numbers last: a code column's CHECK often allows only a few (TaxType IN (1, 2, 3)).
    for c in [c for c in free if family(c) not in ("int", "exact")]:
        v = cat.absent(t, c)
        if v is not None:
            return c, v
    found = _other_parent(cat, t, cols, row)
    if found:
        return found
    for c in [c for c in free if family(c) in ("int", "exact")]:
        v = cat.absent(t, c)
        if v is not None:
            return c, v
    return None


def _other_parent(cat, t, cols, row):
    ms = cat.ms
    for fk in cat.fks:
        if fk.table is t and len(fk.columns) == 1 and fk.columns[0][0] in cols:
            c, p = fk.columns[0]
            others_cond = " AND ".join(
                f"y.{ms.quote(o.name)}{'.ToString()' if o.type in ms.TO_STRING else ''} = "
                f"{literal('mssql', o, row.get(o.name.lower()))}" for o in cols if o is not c)
            # The parent's key as both sides hold it (a CLR value as its ToString() text).
            shown = f"p.{ms.quote(p.name)}" + (".ToString()" if p.type in ms.TO_STRING else "")
            found = ms.query(
                f"SELECT TOP 1 {shown} FROM {ms.qname(fk.ref)} p WHERE NOT EXISTS (SELECT 1 FROM "
                f"{ms.qname(t)} y WHERE y.{ms.quote(c.name)} = p.{ms.quote(p.name)}"
                f"{' AND ' + others_cond if others_cond else ''}) ORDER BY p.{ms.quote(p.name)}")
            if found:
                return c, found[0][0]
    return None


def fresh_copy(cat, t, row):
    """`row` as a new row of `t`: identity columns left to the table, every unique key made one no
    row has. None when a key cannot be."""
    values = {k: v for k, v in row.items() if not t.column(k).identity}
    for _name, ut, cols, _pk, _filt in cat.uniques:
        if ut is not t or any(c.identity for c in cols):
            continue
        if any(c.computed for c in cols):
            return None
        fresh = fresh_value(cat, t, cols, values)
        if fresh is None:
            return None
        values[fresh[0].name.lower()] = fresh[1]
    return values


def default_trials(cat, ms, pg, pg_tables):
    trials, skipped = [], []
    for tname, defaults in sorted(cat.defaults.items()):
        trial = default_trial(cat, ms, pg, pg_tables, cat.tables[tname], defaults)
        (trials if isinstance(trial, Trial) else skipped).append(trial)
    return trials, skipped


def default_trial(cat, ms, pg, pg_tables, t, defaults):
    """The INSERT of a row of `t` without the columns of `defaults` [(Column, definition)], or
    why there is none."""
    tp = pg_tables(t)
    defaulted = {c.name.lower() for c, _ in defaults}
    if cat.is_empty(t):
        values, parents = cat.made_up.row(t)
        ms_setup, pg_setup = [], []
        for pt, pv in parents:
            ms_setup += insert(ms, pt, pv)
            pg_setup += insert(pg, pg_tables(pt), pv)
        row = {c.name.lower(): v for c, v in values}
        kept = [(c, v) for c, v in values if c.name.lower() not in defaulted]
    else:
        found = cat.rows(t, cat.not_pointed_at(t))
        if found:
            # Deleted first, then inserted again: its keys are free.
            row = found[0]
            key = _key_values(t, row)
            ms_setup = [f"DELETE FROM {ms.qname(t)} WHERE {where(ms, t, key)}"]
            pg_setup = [f"DELETE FROM {pg.qname(tp)} WHERE {where(pg, tp, key)}"]
        else:
            # Every row is pointed at: a copy with new keys (identity values from each side's own
            # sequence, which the migration must have moved past the copied rows).
            row = fresh_copy(cat, t, cat.rows(t)[0])
            if row is None:
                return f"defaults of {t.qualified}: every row is pointed at and no new key was found"
            ms_setup, pg_setup = [], []
        kept = [(c, row[c.name.lower()]) for c in t.columns
                if not c.computed and c.name.lower() not in defaulted and c.name.lower() in row]
    cols = [c for c, _ in defaults]
    ms_q = (f"SELECT {ms.select_list(t, cols)}, GETDATE() FROM {ms.qname(t)} WHERE {_read_back(ms, t, row)}")
    pg_cols = ", ".join(f"{pg.quote(tp.column(c.name).name)}::text" for c in cols)
    pg_q = (f"SELECT json_build_array({pg_cols}, clock_timestamp()::timestamp::text)::text FROM {pg.qname(tp)} "
            f"WHERE {_read_back(pg, tp, row)}")
    ms_stmts = insert(ms, t, kept)
    pg_stmts = insert(pg, tp, kept)
    return Trial("default", f"{t.qualified} ({', '.join(c.name for c in cols)})",
                 f"INSERT into {t.qualified} without {'its defaulted columns' if len(cols) > 1 else cols[0].name}",
                 "accept",
                 (ms_setup + ms_stmts[:-1], ms_stmts[-1], ms_q) if len(ms_stmts) == 1 else
                 (ms_setup + ms_stmts[:1], ms_stmts[1], ms_q),
                 (pg_setup, pg_stmts[0], pg_q),
                 columns=cols, definitions=[d for _, d in defaults], old=dict(row))


def _read_back(side, t, row):
    """WHERE text finding the inserted row: by its key, or, when the table gave it an identity
    value, as the row with the highest one."""
    missing = [k for k in t.key if k.lower() not in row]
    if not missing:
        return where(side, t, _key_values(t, row))
    ident = next(c for c in t.columns if c.identity)
    q = side.quote(ident.name)
    return f"{q} = (SELECT MAX({q}) FROM {side.qname(t)})"


def _show(assignment):
    parts = []
    for c, v in assignment:
        if isinstance(v, (dt.datetime, dt.date, dt.time)):
            v = v.isoformat()
        elif isinstance(v, decimal.Decimal):
            v = str(v)
        parts.append(f"{c.name} = {v!r}" if v is not None else f"{c.name} = NULL")
    return ", ".join(parts)
