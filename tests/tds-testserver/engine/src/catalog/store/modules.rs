//! Objects the engine stores but does not run: views, procedures, functions and triggers with
//! their definitions (sys.sql_modules), alias types (sys.types), XML schema collections and
//! extended properties.

use super::{Catalog, ObjectKind, ObjectRef, already_exists, err, now_datetime};
use crate::error::SqlError;
use crate::types::SqlType;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModuleKind {
    View,
    Procedure,
    ScalarFunction,
    InlineTableFunction,
    TableFunction,
    Trigger,
}

impl ModuleKind {
    pub fn type_code(self) -> &'static str {
        match self {
            ModuleKind::View => "V ",
            ModuleKind::Procedure => "P ",
            ModuleKind::ScalarFunction => "FN",
            ModuleKind::InlineTableFunction => "IF",
            ModuleKind::TableFunction => "TF",
            ModuleKind::Trigger => "TR",
        }
    }

    pub fn type_desc(self) -> &'static str {
        match self {
            ModuleKind::View => "VIEW",
            ModuleKind::Procedure => "SQL_STORED_PROCEDURE",
            ModuleKind::ScalarFunction => "SQL_SCALAR_FUNCTION",
            ModuleKind::InlineTableFunction => "SQL_INLINE_TABLE_VALUED_FUNCTION",
            ModuleKind::TableFunction => "SQL_TABLE_VALUED_FUNCTION",
            ModuleKind::Trigger => "SQL_TRIGGER",
        }
    }

    /// The word DROP and error messages use (`DROP VIEW`, `Cannot drop the view`).
    pub fn noun(self) -> &'static str {
        match self {
            ModuleKind::View => "view",
            ModuleKind::Procedure => "procedure",
            ModuleKind::ScalarFunction | ModuleKind::InlineTableFunction | ModuleKind::TableFunction => {
                "function"
            }
            ModuleKind::Trigger => "trigger",
        }
    }
}

/// A view, procedure, function or trigger.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Module {
    pub object_id: i32,
    /// 0 for a database (DDL) trigger, which has no schema and is not in sys.objects.
    pub schema_id: i32,
    pub name: String,
    pub kind: ModuleKind,
    /// The batch that created it, as written (sys.sql_modules.definition).
    pub definition: String,
    /// A DML trigger's table; 0 otherwise.
    pub parent_object_id: i32,
    pub database_trigger: bool,
    pub instead_of: bool,
    pub is_disabled: bool,
    /// A DML trigger's statements (`INSERT`, `UPDATE`, `DELETE`).
    pub events: Vec<String>,
    /// A view's SELECT, as written after `AS` (what SELECT from the view runs).
    pub view_select: Option<String>,
    /// The tables and views a view's SELECT names, as (schema as written, name), each once.
    pub references: Vec<(Option<String>, String)>,
    pub create_date: String,
    pub modify_date: String,
}

impl Module {
    pub(super) fn as_object(&self) -> ObjectRef {
        ObjectRef {
            object_id: self.object_id,
            name: self.name.clone(),
            schema_id: self.schema_id,
            parent_object_id: self.parent_object_id,
            kind: ObjectKind::Module(self.kind),
            create_date: self.create_date.clone(),
            modify_date: self.modify_date.clone(),
        }
    }
}

/// `CREATE TYPE s.n FROM base [NOT] NULL` / `sp_addtype`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AliasType {
    pub user_type_id: i32,
    pub schema_id: i32,
    pub name: String,
    pub base: SqlType,
    pub nullable: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct XmlSchemaCollection {
    pub xml_collection_id: i32,
    pub schema_id: i32,
    pub name: String,
    /// Each CREATE/ALTER ... ADD's schema text, as given.
    pub components: Vec<String>,
    pub create_date: String,
}

/// sys.extended_properties (class 0 database, 1 object or column, 3 schema, ...).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtendedProperty {
    pub class: i32,
    pub major_id: i32,
    pub minor_id: i32,
    pub name: String,
    pub value: String,
}

/// What `create_module` needs besides the name.
#[derive(Debug, Clone)]
pub struct NewModule {
    pub kind: ModuleKind,
    pub definition: String,
    /// A DML trigger's table (schema, name).
    pub parent: Option<(String, String)>,
    pub database_trigger: bool,
    pub instead_of: bool,
    /// A DML trigger's statements (`INSERT`, `UPDATE`, `DELETE`).
    pub events: Vec<String>,
    pub view_select: Option<String>,
    /// The tables and views a view's SELECT names, as (schema as written, name), each once.
    pub references: Vec<(Option<String>, String)>,
    /// CREATE OR ALTER / ALTER: replaces an existing module of the same name.
    pub replace: bool,
}

/// User-defined type ids start here in SQL Server (257 and up).
const FIRST_USER_TYPE_ID: i32 = 257;

fn missing_schema(schema: &str) -> SqlError {
    err(
        2760,
        format!(
            "The specified schema name \"{schema}\" either does not exist or you do not have permission to use it."
        ),
    )
}

impl Catalog {
    /// CREATE VIEW/PROCEDURE/FUNCTION/TRIGGER. Returns the object id.
    pub fn create_module(&mut self, schema: &str, name: &str, m: NewModule) -> Result<i32, SqlError> {
        let schema_id = if m.database_trigger {
            0
        } else {
            self.schema_id(schema).ok_or_else(|| missing_schema(schema))?
        };
        let parent_object_id = match &m.parent {
            Some((ps, pt)) => match self.find_table(ps, pt, 0) {
                Some(t) => t.object_id,
                None => {
                    return Err(err(
                        8197,
                        format!("The object '{ps}.{pt}' does not exist or is invalid for this operation."),
                    ));
                }
            },
            None => 0,
        };
        let existing = self
            .modules
            .values()
            .find(|x| {
                x.schema_id == schema_id
                    && x.database_trigger == m.database_trigger
                    && x.name.eq_ignore_ascii_case(name)
            })
            .map(|x| (x.object_id, x.kind, x.create_date.clone()));
        let now = now_datetime();
        let (object_id, create_date) = match existing {
            Some((id, kind, created)) if m.replace && kind == m.kind => (id, created),
            Some(_) => return Err(already_exists(name)),
            None if !m.database_trigger && self.name_taken(schema_id, None, name) => {
                return Err(already_exists(name));
            }
            None => (self.allocate_id(false), now.clone()),
        };
        self.modules.insert(
            object_id,
            Module {
                object_id,
                schema_id,
                name: name.to_string(),
                kind: m.kind,
                definition: m.definition,
                parent_object_id,
                database_trigger: m.database_trigger,
                instead_of: m.instead_of,
                is_disabled: false,
                events: m.events,
                view_select: m.view_select,
                references: m.references,
                create_date,
                modify_date: now,
            },
        );
        self.touch();
        Ok(object_id)
    }

    /// DROP VIEW/PROCEDURE/FUNCTION/TRIGGER; `Ok(false)` when there is no such module.
    pub fn drop_module(&mut self, kind_noun: &str, schema: &str, name: &str) -> Result<bool, SqlError> {
        let Some(schema_id) = self.schema_id(schema) else {
            return Ok(false);
        };
        let found = self
            .modules
            .values()
            .find(|m| !m.database_trigger && m.schema_id == schema_id && m.name.eq_ignore_ascii_case(name))
            .map(|m| (m.object_id, m.kind));
        match found {
            Some((id, kind)) if kind.noun() == kind_noun => {
                self.modules.remove(&id);
                self.touch();
                Ok(true)
            }
            Some(_) => Err(err(
                3705,
                format!(
                    "Cannot use DROP {} with '{name}' because '{name}' is a {}. ",
                    kind_noun.to_uppercase(),
                    found.map(|f| f.1.noun()).unwrap_or("")
                ),
            )),
            None => Ok(false),
        }
    }

    /// DROP TRIGGER name ON DATABASE; `false` when there is none.
    pub fn drop_database_trigger(&mut self, name: &str) -> bool {
        let id = self
            .modules
            .values()
            .find(|m| m.database_trigger && m.name.eq_ignore_ascii_case(name))
            .map(|m| m.object_id);
        match id {
            Some(id) => {
                self.modules.remove(&id);
                self.touch();
                true
            }
            None => false,
        }
    }

    /// DROP TYPE: 218 for an unknown type, 3732 while a column uses it.
    pub fn drop_alias_type(&mut self, schema: &str, name: &str) -> Result<(), SqlError> {
        let Some(a) = self.alias_type(schema, name).cloned() else {
            return Err(err(
                218,
                format!(
                    "Cannot find the type '{name}', because it does not exist or you do not have permission."
                ),
            ));
        };
        if let Some(t) = self.tables.values().find(|t| {
            t.columns.iter().any(|c| {
                c.user_type
                    .as_deref()
                    .is_some_and(|u| u.eq_ignore_ascii_case(&a.name))
            })
        }) {
            return Err(err(
                3732,
                format!(
                    "Cannot drop type '{}' because it is being referenced by object '{}'. There may be other objects that reference this type.",
                    a.name, t.name
                ),
            ));
        }
        self.alias_types.retain(|x| x.user_type_id != a.user_type_id);
        self.touch();
        Ok(())
    }

    /// The module a name resolves to (not database triggers).
    pub fn find_module(&self, schema: &str, name: &str) -> Option<&Module> {
        let schema_id = self.schema_id(schema)?;
        self.modules
            .values()
            .find(|m| !m.database_trigger && m.schema_id == schema_id && m.name.eq_ignore_ascii_case(name))
    }

    /// Every module, database triggers included, by object id.
    pub fn modules(&self) -> impl Iterator<Item = &Module> {
        self.modules.values()
    }

    /// ENABLE/DISABLE TRIGGER: the DML triggers of table `parent` (`None`: the database's
    /// DDL triggers), all of them or those named (with an optional schema). Nothing changes
    /// unless every named trigger is found; `Err` carries the first missing name.
    pub fn set_triggers_disabled(
        &mut self,
        parent: Option<i32>,
        names: Option<&[(Option<String>, String)]>,
        disabled: bool,
    ) -> Result<(), String> {
        let on_parent = |m: &Module| {
            m.kind == ModuleKind::Trigger
                && match parent {
                    None => m.database_trigger,
                    Some(id) => !m.database_trigger && m.parent_object_id == id,
                }
        };
        let ids: Vec<i32> = match names {
            None => self
                .modules
                .values()
                .filter(|m| on_parent(m))
                .map(|m| m.object_id)
                .collect(),
            Some(names) => {
                let mut ids = Vec::new();
                for (schema, name) in names {
                    let schema_id = schema.as_deref().map(|s| self.schema_id(s));
                    let found = self.modules.values().find(|m| {
                        on_parent(m)
                            && m.name.eq_ignore_ascii_case(name)
                            && schema_id.is_none_or(|s| s == Some(m.schema_id))
                    });
                    match found {
                        Some(m) => ids.push(m.object_id),
                        None => return Err(name.clone()),
                    }
                }
                ids
            }
        };
        for m in self.modules.values_mut() {
            if ids.contains(&m.object_id) {
                m.is_disabled = disabled;
            }
        }
        self.version += 1;
        Ok(())
    }

    /// CREATE TYPE ... FROM / sp_addtype.
    pub fn create_alias_type(
        &mut self,
        schema: &str,
        name: &str,
        base: SqlType,
        nullable: bool,
    ) -> Result<(), SqlError> {
        let schema_id = self.schema_id(schema).ok_or_else(|| missing_schema(schema))?;
        if self.alias_type(schema, name).is_some() || crate::types::names::parse_type_name(name).is_some() {
            return Err(err(
                219,
                format!("The type '{name}' already exists, or you do not have permission to create it."),
            ));
        }
        let user_type_id = FIRST_USER_TYPE_ID + self.alias_types.len() as i32;
        self.alias_types.push(AliasType {
            user_type_id,
            schema_id,
            name: name.to_string(),
            base,
            nullable,
        });
        self.touch();
        Ok(())
    }

    /// An alias type by (schema, name); an empty schema means `dbo`.
    pub fn alias_type(&self, schema: &str, name: &str) -> Option<&AliasType> {
        let schema = if schema.is_empty() { "dbo" } else { schema };
        let schema_id = self.schema_id(schema)?;
        self.alias_types
            .iter()
            .find(|a| a.schema_id == schema_id && a.name.eq_ignore_ascii_case(name))
    }

    pub fn alias_types(&self) -> &[AliasType] {
        &self.alias_types
    }

    /// CREATE XML SCHEMA COLLECTION (`add` false) or ALTER ... ADD (`add` true).
    pub fn xml_schema_collection(
        &mut self,
        schema: &str,
        name: &str,
        content: String,
        add: bool,
    ) -> Result<(), SqlError> {
        let schema_id = self.schema_id(schema).ok_or_else(|| missing_schema(schema))?;
        let existing = self
            .xml_collections
            .iter_mut()
            .find(|x| x.schema_id == schema_id && x.name.eq_ignore_ascii_case(name));
        match (existing, add) {
            (Some(x), true) => x.components.push(content),
            (None, false) => {
                let xml_collection_id = 65_536 + self.xml_collections.len() as i32;
                self.xml_collections.push(XmlSchemaCollection {
                    xml_collection_id,
                    schema_id,
                    name: name.to_string(),
                    components: vec![content],
                    create_date: now_datetime(),
                });
            }
            (Some(_), false) => {
                return Err(err(
                    6301,
                    format!("The XML schema collection '{name}' already exists in the database."),
                ));
            }
            (None, true) => {
                return Err(err(
                    2715,
                    format!(
                        "Cannot find the XML schema collection '{name}', because it does not exist or you do not have permission."
                    ),
                ));
            }
        }
        self.touch();
        Ok(())
    }

    pub fn find_xml_schema_collection(&self, schema: &str, name: &str) -> Option<&XmlSchemaCollection> {
        let schema_id = self.schema_id(if schema.is_empty() { "dbo" } else { schema })?;
        self.xml_collections
            .iter()
            .find(|x| x.schema_id == schema_id && x.name.eq_ignore_ascii_case(name))
    }

    pub fn xml_schema_collections(&self) -> &[XmlSchemaCollection] {
        &self.xml_collections
    }

    /// sp_addextendedproperty; error 15233 when the property already exists.
    pub fn add_extended_property(&mut self, p: ExtendedProperty) -> Result<(), SqlError> {
        if self.extended_properties.iter().any(|e| {
            e.class == p.class && e.major_id == p.major_id && e.minor_id == p.minor_id && e.name == p.name
        }) {
            return Err(err(
                15233,
                format!(
                    "Property cannot be added. Property '{}' already exists for '{}'.",
                    p.name, p.major_id
                ),
            ));
        }
        self.extended_properties.push(p);
        self.touch();
        Ok(())
    }

    /// NOCHECK / CHECK CONSTRAINT: a foreign key's or check's enforcement and trust.
    pub fn set_constraint_state(&mut self, table_id: i32, name: &str, disabled: bool, not_trusted: bool) {
        if let Some(t) = self.tables.get_mut(&table_id) {
            for f in t
                .foreign_keys
                .iter_mut()
                .filter(|f| f.name.eq_ignore_ascii_case(name))
            {
                f.is_disabled = disabled;
                f.is_not_trusted = not_trusted;
            }
            for c in t.checks.iter_mut().filter(|c| c.name.eq_ignore_ascii_case(name)) {
                c.is_disabled = disabled;
                c.is_not_trusted = not_trusted;
            }
        }
        self.touch();
    }

    /// The first enabled DML trigger of a table that fires on `event` (`INSERT`, `UPDATE`,
    /// `DELETE`).
    pub fn enabled_trigger(&self, table_id: i32, event: &str) -> Option<&Module> {
        self.modules.values().find(|m| {
            m.kind == ModuleKind::Trigger
                && !m.database_trigger
                && !m.is_disabled
                && m.parent_object_id == table_id
                && m.events.iter().any(|e| e.eq_ignore_ascii_case(event))
        })
    }

    pub fn extended_properties(&self) -> &[ExtendedProperty] {
        &self.extended_properties
    }
}
