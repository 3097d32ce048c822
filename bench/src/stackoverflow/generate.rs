//! One function per table turning `(dataset, id)` into that row. Everything a row refers to
//! (its post's creation date, whether a post is a question, which users existed at a moment)
//! is recomputed from ids, so rows are independent of each other and of generation order.
//!
//! Deliberate simplifications, since nothing reads these as statistics: `AnswerCount`,
//! `CommentCount` and the like are drawn, not counted, and an accepted answer is an answer
//! posted shortly after its question, not necessarily one of its own answers.

use super::rng::{Rng, Stream};
use super::schema::Table;
use super::text::{self, truncate_utf16};
use super::{Dataset, Row, Value};

/// 2008-07-31 00:00:00 UTC (the public beta) and 2010-12-31 23:59:59.990, in Unix milliseconds.
const START_MS: i64 = 1_217_462_400_000;
const END_MS: i64 = 1_293_839_999_990;
const SPAN_MS: i64 = END_MS - START_MS;
const DAY_MS: i64 = 86_400_000;
/// Creation time of id i out of n is `START + SPAN * (i/n)^GROWTH`: the site grew, so later
/// days hold more rows.
const GROWTH: f64 = 0.7;

pub const VOTE_TYPES: [&str; 15] = [
    "AcceptedByOriginator",
    "UpMod",
    "DownMod",
    "Offensive",
    "Favorite",
    "Close",
    "Reopen",
    "BountyStart",
    "BountyClose",
    "Deletion",
    "Undeletion",
    "Spam",
    "InformModerator",
    "ModeratorReview",
    "ApproveEditSuggestion",
];
pub const POST_TYPES: [&str; 10] = [
    "Question",
    "Answer",
    "Wiki",
    "TagWikiExcerpt",
    "TagWiki",
    "ModeratorNomination",
    "WikiPlaceholder",
    "PrivilegeWiki",
    "CollectiveArticle",
    "CollectiveDiscussion",
];
pub const LINK_TYPES: [&str; 2] = ["Linked", "Duplicate"];

const QUESTION: i32 = 1;
const ANSWER: i32 = 2;

/// A moment as Unix milliseconds, always a multiple of 10 ms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Ms(i64);

impl Ms {
    fn at_fraction(f: f64) -> Ms {
        let ms = START_MS + (SPAN_MS as f64 * f.clamp(0.0, 1.0).powf(GROWTH)) as i64;
        Ms(ms - ms % 10)
    }

    /// The same moment plus a heavy-tailed number of days (usually about `typical_days` or
    /// fewer) and a random time of day, never past the end of the data.
    fn later(self, rng: &mut Rng, typical_days: f64) -> Ms {
        let days = rng.heavy_tail(typical_days, 1.5, 1000);
        let ms = self.0 + i64::from(days) * DAY_MS + rng.range_i64(0, DAY_MS / 10 - 1) * 10;
        if ms <= END_MS {
            return Ms(ms);
        }
        // Spread what would fall past the end over the remaining time instead of piling it
        // up on the last day.
        Ms(self.0 + rng.range_i64(0, (END_MS - self.0) / 10) * 10)
    }

    fn midnight(self) -> Ms {
        Ms(self.0 - self.0.rem_euclid(DAY_MS))
    }

    fn fraction(self) -> f64 {
        ((self.0 - START_MS) as f64 / SPAN_MS as f64)
            .clamp(0.0, 1.0)
            .powf(1.0 / GROWTH)
    }

    fn value(self) -> Value {
        Value::DateTime(super::datetime_from_unix_ms(self.0))
    }
}

fn int(v: i64) -> Value {
    Value::Int(v as i32)
}

fn opt<T>(v: Option<T>, f: impl FnOnce(T) -> Value) -> Value {
    v.map_or(Value::Null, f)
}

impl Dataset {
    fn created(&self, table: Table, id: u64) -> Ms {
        let n = self.rows_of(table);
        Ms::at_fraction((id - 1) as f64 / n as f64)
    }

    /// A user who already existed at `t`, older (more active) users more likely.
    fn user_at(&self, rng: &mut Rng, t: Ms) -> u64 {
        let existing = ((self.users as f64 * t.fraction()).ceil() as u64).clamp(1, self.users);
        rng.skewed_id(existing, 1.6)
    }

    /// PostTypeId of any post, from its id alone. Post 1 is a question, so every answer has one
    /// to point at.
    pub(super) fn post_kind(&self, id: u64) -> i32 {
        if id == 1 {
            return QUESTION;
        }
        let mut rng = Rng::for_row(self.seed, Stream::PostKind, id);
        match rng.below(1000) {
            0..=294 => QUESTION,
            295..=984 => ANSWER,
            _ => 3 + rng.below(6) as i32,
        }
    }

    /// The nearest question at or below a random id shortly before `id` (id ≥ 2).
    fn question_before(&self, rng: &mut Rng, id: u64) -> u64 {
        let back = rng.below((id - 1).min(2_000)) + 1;
        let mut j = id - back;
        while j > 1 && self.post_kind(j) != QUESTION {
            j -= 1;
        }
        j
    }

    fn answer_after(&self, rng: &mut Rng, id: u64) -> Option<u64> {
        let start = id + 1 + rng.below(20);
        (start..=(start + 30).min(self.posts)).find(|j| self.post_kind(*j) == ANSWER)
    }

    pub(super) fn generate(&self, table: Table, id: u64) -> Row {
        match table {
            Table::Users => self.user(id),
            Table::Posts => self.post(id),
            Table::Comments => self.comment(id),
            Table::Badges => self.badge(id),
            Table::PostLinks => self.post_link(id),
            Table::Votes => self.vote(id),
            Table::VoteTypes => lookup(id, &VOTE_TYPES),
            Table::PostTypes => lookup(id, &POST_TYPES),
            Table::LinkTypes => lookup(id, &LINK_TYPES),
        }
    }

    fn user(&self, id: u64) -> Row {
        let mut rng = Rng::for_row(self.seed, Stream::Users, id);
        let created = self.created(Table::Users, id);
        let about = rng.chance(350).then(|| {
            let len = rng.range(10, 200) + rng.heavy_tail(150.0, 2.0, 8_000) as usize;
            text::html_body(&mut rng, len)
        });
        let age = rng.chance(200).then(|| rng.range_i64(16, 72));
        let mut name = text::display_name(&mut rng, id);
        truncate_utf16(&mut name, 40);
        let down = rng.heavy_tail(1.0, 1.2, 50_000);
        let email = rng.chance(300).then(|| text::hex(&mut rng, 32));
        let last_access = created.later(&mut rng, 60.0);
        let location = rng.chance(450).then(|| text::location(&mut rng));
        let reputation = if rng.chance(400) {
            1
        } else {
            1 + rng.heavy_tail(20.0, 1.1, 500_000)
        };
        let up = rng.heavy_tail(3.0, 1.2, 100_000);
        let views = rng.heavy_tail(5.0, 1.3, 1_000_000);
        let website = rng.chance(300).then(|| text::website(&mut rng, id));
        let account = (!rng.chance(30)).then(|| id as i64 * 3 + rng.below(3) as i64);
        vec![
            int(id as i64),
            opt(about, Value::Text),
            opt(age, int),
            created.value(),
            Value::Text(name),
            Value::Int(down),
            opt(email, Value::Text),
            last_access.value(),
            opt(location, Value::Text),
            Value::Int(reputation),
            Value::Int(up),
            Value::Int(views),
            opt(website, Value::Text),
            opt(account, int),
        ]
    }

    fn post(&self, id: u64) -> Row {
        let mut rng = Rng::for_row(self.seed, Stream::Posts, id);
        let kind = self.post_kind(id);
        let question = kind == QUESTION;
        let created = self.created(Table::Posts, id);
        let accepted = if question && rng.chance(450) {
            self.answer_after(&mut rng, id)
        } else {
            None
        };
        let answer_count = question.then(|| rng.heavy_tail(1.5, 2.5, 500));
        let body_len = match kind {
            QUESTION => rng.range(150, 700) + rng.heavy_tail(500.0, 2.5, 30_000) as usize,
            ANSWER => rng.range(80, 500) + rng.heavy_tail(400.0, 2.5, 30_000) as usize,
            _ => rng.range(20, 300),
        };
        let body = text::html_body(&mut rng, body_len);
        let closed = (question && rng.chance(40)).then(|| created.later(&mut rng, 5.0));
        let comment_count = rng.heavy_tail(1.0, 2.0, 300);
        let community = rng.chance(15).then(|| created.later(&mut rng, 30.0));
        let favorite = (question && rng.chance(400)).then(|| 1 + rng.heavy_tail(1.0, 1.5, 10_000));
        let edited = rng.chance(350).then(|| created.later(&mut rng, 10.0));
        let last_activity = edited.unwrap_or(created).later(&mut rng, 20.0).max(created);
        let (editor_name, editor_id) = match edited {
            Some(_) if rng.chance(30) => {
                let mut name = text::display_name(&mut rng, 0);
                truncate_utf16(&mut name, 40);
                (Some(name), None)
            }
            Some(at) => (None, Some(self.user_at(&mut rng, at))),
            None => (None, None),
        };
        let owner = (!rng.chance(10)).then(|| self.user_at(&mut rng, created));
        let parent = (kind == ANSWER).then(|| self.question_before(&mut rng, id));
        let score = if rng.chance(80) {
            -(rng.range_i64(1, 6) as i32)
        } else {
            rng.heavy_tail(2.0, 1.6, 30_000)
        };
        let tags = question.then(|| text::tags(&mut rng));
        let title = question.then(|| {
            let mut t = text::title(&mut rng);
            truncate_utf16(&mut t, 250);
            t
        });
        let views = if question {
            rng.range(10, 200) as i32 + rng.heavy_tail(300.0, 1.5, 2_000_000)
        } else {
            0
        };
        vec![
            int(id as i64),
            opt(accepted, |v| int(v as i64)),
            opt(answer_count, Value::Int),
            Value::Text(body),
            opt(closed, Ms::value),
            Value::Int(comment_count),
            opt(community, Ms::value),
            created.value(),
            opt(favorite, Value::Int),
            last_activity.value(),
            opt(edited, Ms::value),
            opt(editor_name, Value::Text),
            opt(editor_id, |v| int(v as i64)),
            opt(owner, |v| int(v as i64)),
            opt(parent, |v| int(v as i64)),
            Value::Int(kind),
            Value::Int(score),
            opt(tags, Value::Text),
            opt(title, Value::Text),
            Value::Int(views),
        ]
    }

    fn comment(&self, id: u64) -> Row {
        let mut rng = Rng::for_row(self.seed, Stream::Comments, id);
        let post = 1 + rng.below(self.posts);
        let created = self.created(Table::Posts, post).later(&mut rng, 2.0);
        // The public data never has a NULL score, but the column allows one: exercise it.
        let score = match rng.below(1000) {
            0..=4 => None,
            5..=854 => Some(0),
            _ => Some(rng.heavy_tail(1.0, 1.5, 5_000)),
        };
        let len = rng.range(10, 120) + rng.heavy_tail(60.0, 1.8, 600) as usize;
        let mut body = text::plain_text(&mut rng, len);
        truncate_utf16(&mut body, 600);
        let user = (!rng.chance(20)).then(|| self.user_at(&mut rng, created));
        vec![
            int(id as i64),
            created.value(),
            int(post as i64),
            opt(score, Value::Int),
            Value::Text(body),
            opt(user, |v| int(v as i64)),
        ]
    }

    fn badge(&self, id: u64) -> Row {
        let mut rng = Rng::for_row(self.seed, Stream::Badges, id);
        let user = rng.skewed_id(self.users, 1.5);
        let date = self.created(Table::Users, user).later(&mut rng, 40.0);
        vec![
            int(id as i64),
            Value::Text(rng.pick(text::BADGE_NAMES).to_owned()),
            int(user as i64),
            date.value(),
        ]
    }

    fn post_link(&self, id: u64) -> Row {
        let mut rng = Rng::for_row(self.seed, Stream::PostLinks, id);
        let post = 1 + rng.below(self.posts);
        let related = 1 + rng.below(post.max(2) - 1);
        let link_type = if rng.chance(900) { 1 } else { 2 };
        let created = self.created(Table::Posts, post).later(&mut rng, 20.0);
        vec![
            int(id as i64),
            created.value(),
            int(post as i64),
            int(related as i64),
            Value::Int(link_type),
        ]
    }

    fn vote(&self, id: u64) -> Row {
        let mut rng = Rng::for_row(self.seed, Stream::Votes, id);
        let post = rng.skewed_id(self.posts, 1.3);
        let vote_type: i32 = match rng.below(1000) {
            0..=699 => 2,
            700..=779 => 1,
            780..=849 => 3,
            850..=929 => 5,
            930..=954 => 10,
            955..=969 => 6,
            970..=974 => 8,
            975..=979 => 9,
            980..=984 => 7,
            985..=989 => 11,
            990..=994 => 12,
            _ => 4 + 9 * rng.below(2) as i32, // Offensive or InformModerator
        };
        // Votes are dated to the day, as in the public data.
        let date = self.created(Table::Posts, post).later(&mut rng, 15.0).midnight();
        let user = matches!(vote_type, 5 | 8).then(|| self.user_at(&mut rng, date));
        let bounty = matches!(vote_type, 8 | 9).then(|| 50 * rng.range_i64(1, 10));
        vec![
            int(id as i64),
            int(post as i64),
            opt(user, |v| int(v as i64)),
            opt(bounty, int),
            Value::Int(vote_type),
            date.value(),
        ]
    }
}

fn lookup(id: u64, names: &[&str]) -> Row {
    let name = names.get(id as usize - 1).copied().unwrap_or_default();
    vec![int(id as i64), Value::Text(name.to_owned())]
}
