//! The StackOverflow2010 schema: 9 tables, their SQL Server column types, and their sizes.

use std::fmt;
use std::str::FromStr;

/// A column's SQL Server type. The database uses only these four.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SqlType {
    Int,
    /// `nvarchar(n)`: n is in UTF-16 code units, so a non-BMP character counts twice.
    NVarChar(u16),
    NVarCharMax,
    /// `datetime` (1/300 s ticks). Generated values are whole multiples of 10 ms, which
    /// `datetime` and PostgreSQL `timestamp` both hold exactly.
    DateTime,
}

impl SqlType {
    pub fn mssql(self) -> String {
        match self {
            SqlType::Int => "int".to_owned(),
            SqlType::NVarChar(n) => format!("nvarchar({n})"),
            SqlType::NVarCharMax => "nvarchar(max)".to_owned(),
            SqlType::DateTime => "datetime".to_owned(),
        }
    }

    /// The PostgreSQL type a migration of this column is expected to produce.
    pub fn postgres(self) -> String {
        match self {
            SqlType::Int => "integer".to_owned(),
            SqlType::NVarChar(n) => format!("varchar({n})"),
            SqlType::NVarCharMax => "text".to_owned(),
            SqlType::DateTime => "timestamp(3) without time zone".to_owned(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Column {
    pub name: &'static str,
    pub ty: SqlType,
    pub nullable: bool,
}

const fn col(name: &'static str, ty: SqlType, nullable: bool) -> Column {
    Column { name, ty, nullable }
}

use SqlType::{DateTime, Int, NVarChar, NVarCharMax};

/// Every table's first column is `Id int IDENTITY(1,1) NOT NULL` and its primary key; the ids
/// are dense `1..=rows`, so an identity assigned by the server and the generated one agree.
const BADGES: &[Column] = &[
    col("Id", Int, false),
    col("Name", NVarChar(40), false),
    col("UserId", Int, false),
    col("Date", DateTime, false),
];
const COMMENTS: &[Column] = &[
    col("Id", Int, false),
    col("CreationDate", DateTime, false),
    col("PostId", Int, false),
    col("Score", Int, true),
    col("Text", NVarChar(700), false),
    col("UserId", Int, true),
];
const LINK_TYPES: &[Column] = &[col("Id", Int, false), col("Type", NVarChar(50), false)];
const POST_LINKS: &[Column] = &[
    col("Id", Int, false),
    col("CreationDate", DateTime, false),
    col("PostId", Int, false),
    col("RelatedPostId", Int, false),
    col("LinkTypeId", Int, false),
];
const POSTS: &[Column] = &[
    col("Id", Int, false),
    col("AcceptedAnswerId", Int, true),
    col("AnswerCount", Int, true),
    col("Body", NVarCharMax, false),
    col("ClosedDate", DateTime, true),
    col("CommentCount", Int, true),
    col("CommunityOwnedDate", DateTime, true),
    col("CreationDate", DateTime, false),
    col("FavoriteCount", Int, true),
    col("LastActivityDate", DateTime, false),
    col("LastEditDate", DateTime, true),
    col("LastEditorDisplayName", NVarChar(40), true),
    col("LastEditorUserId", Int, true),
    col("OwnerUserId", Int, true),
    col("ParentId", Int, true),
    col("PostTypeId", Int, false),
    col("Score", Int, false),
    col("Tags", NVarChar(150), true),
    col("Title", NVarChar(250), true),
    col("ViewCount", Int, false),
];
const POST_TYPES: &[Column] = &[col("Id", Int, false), col("Type", NVarChar(50), false)];
const USERS: &[Column] = &[
    col("Id", Int, false),
    col("AboutMe", NVarCharMax, true),
    col("Age", Int, true),
    col("CreationDate", DateTime, false),
    col("DisplayName", NVarChar(40), false),
    col("DownVotes", Int, false),
    col("EmailHash", NVarChar(40), true),
    col("LastAccessDate", DateTime, false),
    col("Location", NVarChar(100), true),
    col("Reputation", Int, false),
    col("UpVotes", Int, false),
    col("Views", Int, false),
    col("WebsiteUrl", NVarChar(200), true),
    col("AccountId", Int, true),
];
const VOTES: &[Column] = &[
    col("Id", Int, false),
    col("PostId", Int, false),
    col("UserId", Int, true),
    col("BountyAmount", Int, true),
    col("VoteTypeId", Int, false),
    col("CreationDate", DateTime, false),
];
const VOTE_TYPES: &[Column] = &[col("Id", Int, false), col("Name", NVarChar(50), false)];

/// A foreign key of the real data model (the published database declares none; loaders may
/// add them with `--foreign-keys`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ForeignKey {
    pub column: &'static str,
    pub references: Table,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Table {
    Votes,
    Comments,
    Posts,
    Badges,
    Users,
    PostLinks,
    VoteTypes,
    PostTypes,
    LinkTypes,
}

impl Table {
    /// All tables, largest first (the order the benchmark lists them in).
    pub const ALL: [Table; 9] = [
        Table::Votes,
        Table::Comments,
        Table::Posts,
        Table::Badges,
        Table::Users,
        Table::PostLinks,
        Table::VoteTypes,
        Table::PostTypes,
        Table::LinkTypes,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Table::Votes => "Votes",
            Table::Comments => "Comments",
            Table::Posts => "Posts",
            Table::Badges => "Badges",
            Table::Users => "Users",
            Table::PostLinks => "PostLinks",
            Table::VoteTypes => "VoteTypes",
            Table::PostTypes => "PostTypes",
            Table::LinkTypes => "LinkTypes",
        }
    }

    pub fn columns(self) -> &'static [Column] {
        match self {
            Table::Votes => VOTES,
            Table::Comments => COMMENTS,
            Table::Posts => POSTS,
            Table::Badges => BADGES,
            Table::Users => USERS,
            Table::PostLinks => POST_LINKS,
            Table::VoteTypes => VOTE_TYPES,
            Table::PostTypes => POST_TYPES,
            Table::LinkTypes => LINK_TYPES,
        }
    }

    /// Rows in the real StackOverflow2010 database (scale 1.0).
    pub fn full_rows(self) -> u64 {
        match self {
            Table::Votes => 10_143_364,
            Table::Comments => 3_875_183,
            Table::Posts => 3_729_195,
            Table::Badges => 1_102_020,
            Table::Users => 299_398,
            Table::PostLinks => 161_519,
            Table::VoteTypes => 15,
            Table::PostTypes => 10,
            Table::LinkTypes => 2,
        }
    }

    pub fn is_lookup(self) -> bool {
        matches!(self, Table::VoteTypes | Table::PostTypes | Table::LinkTypes)
    }

    /// Rows at a scale factor: lookup tables keep their real size, the others are
    /// `round(full * scale)` but never fewer than one row, so every foreign key has a target.
    pub fn rows_at(self, scale: f64) -> u64 {
        if self.is_lookup() {
            return self.full_rows();
        }
        ((self.full_rows() as f64 * scale).round() as u64).max(1)
    }

    pub fn foreign_keys(self) -> &'static [ForeignKey] {
        match self {
            Table::Votes => VOTES_FK,
            Table::Comments => COMMENTS_FK,
            Table::Posts => POSTS_FK,
            Table::Badges => BADGES_FK,
            Table::PostLinks => POST_LINKS_FK,
            Table::Users | Table::VoteTypes | Table::PostTypes | Table::LinkTypes => &[],
        }
    }
}

const fn fk(column: &'static str, references: Table) -> ForeignKey {
    ForeignKey { column, references }
}

const VOTES_FK: &[ForeignKey] = &[
    fk("PostId", Table::Posts),
    fk("UserId", Table::Users),
    fk("VoteTypeId", Table::VoteTypes),
];
const COMMENTS_FK: &[ForeignKey] = &[fk("PostId", Table::Posts), fk("UserId", Table::Users)];
const POSTS_FK: &[ForeignKey] = &[
    fk("AcceptedAnswerId", Table::Posts),
    fk("LastEditorUserId", Table::Users),
    fk("OwnerUserId", Table::Users),
    fk("ParentId", Table::Posts),
    fk("PostTypeId", Table::PostTypes),
];
const BADGES_FK: &[ForeignKey] = &[fk("UserId", Table::Users)];
const POST_LINKS_FK: &[ForeignKey] = &[
    fk("PostId", Table::Posts),
    fk("RelatedPostId", Table::Posts),
    fk("LinkTypeId", Table::LinkTypes),
];

impl fmt::Display for Table {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[derive(Debug, thiserror::Error)]
#[error(
    "unknown table {0:?} (expected one of Votes, Comments, Posts, Badges, Users, PostLinks, VoteTypes, PostTypes, LinkTypes)"
)]
pub struct UnknownTable(String);

impl FromStr for Table {
    type Err = UnknownTable;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Table::ALL
            .into_iter()
            .find(|t| t.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| UnknownTable(s.to_owned()))
    }
}

/// The whole schema, largest table first.
pub fn schema() -> Vec<(Table, &'static [Column])> {
    Table::ALL.iter().map(|t| (*t, t.columns())).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_scale_is_the_published_total() {
        let total: u64 = Table::ALL.iter().map(|t| t.rows_at(1.0)).sum();
        assert_eq!(total, 19_310_706);
    }

    #[test]
    fn default_scale_rows() {
        assert_eq!(Table::Votes.rows_at(0.01), 101_434);
        assert_eq!(Table::LinkTypes.rows_at(0.01), 2);
        assert_eq!(Table::Users.rows_at(0.000_000_1), 1);
    }

    #[test]
    fn every_table_starts_with_its_id() {
        for (t, cols) in schema() {
            assert_eq!(cols[0].name, "Id", "{t}");
            assert_eq!(cols[0].ty, SqlType::Int);
            assert!(!cols[0].nullable);
        }
    }
}
