//! What a plan publishes through the API: one MigrationTask per engine task (and which engine
//! task a MigrationTask names), and the plan summary in the Migration's status.

use super::*;

/// The MigrationTasks of a plan: one per engine task, partitions of a table numbered in key order.
pub fn task_specs<P: PublishedPlan>(plan: &P) -> Vec<MigrationTaskSpec> {
    let mut specs = Vec::with_capacity(plan.tasks().len());
    for (i, t) in plan.tables().iter().enumerate() {
        let mut tasks: Vec<&TaskPlan> = plan.tasks().iter().filter(|task| task.table == i).collect();
        // `None` (unbounded below) sorts first.
        tasks.sort_by_key(|task| task.lower);
        let count = i32::try_from(tasks.len()).unwrap_or(i32::MAX);
        let key_column = if count > 1 {
            t.int_key_name().map(str::to_string)
        } else {
            None
        };
        let columns: Vec<SpecColumn> = t
            .columns()
            .iter()
            .take(MAX_TASK_COLUMNS)
            .map(PublishedColumn::spec)
            .collect();
        let (schema, name) = t.source();
        let (target_schema, target_name) = t.target();
        for (index, task) in tasks.into_iter().enumerate() {
            let index = i32::try_from(index).unwrap_or(i32::MAX);
            specs.push(MigrationTaskSpec {
                migration: String::new(),
                table: TableRef::new(schema, name),
                target_table: TableRef::new(target_schema, target_name),
                partition: PartitionSpec::new(
                    index,
                    count,
                    key_column.clone(),
                    bound(task.lower),
                    bound(task.upper),
                ),
                estimated_rows: task.estimated_rows,
                estimated_bytes: task.estimated_bytes.max(0),
                columns: columns.clone(),
            });
        }
    }
    // Largest first, like the engine's own order (the operator sorts again; this only orders creation).
    specs.sort_by_key(|s| std::cmp::Reverse((s.estimated_bytes, s.estimated_rows)));
    specs
}

/// The engine task a MigrationTask stands for.
pub fn matching_task<'p, P: PublishedPlan>(plan: &'p P, spec: &MigrationTaskSpec) -> Option<&'p TaskPlan> {
    plan.tasks().iter().find(|task| {
        let (schema, name) = plan.tables()[task.table].source();
        schema == spec.table.schema
            && name == spec.table.name
            && bound(task.lower) == spec.partition.lower_bound
            && bound(task.upper) == spec.partition.upper_bound
    })
}

/// [`matching_task`], or the error that names the MigrationTask and its range.
pub(crate) fn task_for<'p, P: PublishedPlan>(
    plan: &'p P,
    task: &MigrationTask,
) -> Result<&'p TaskPlan, K8sError> {
    matching_task(plan, &task.spec).ok_or_else(|| K8sError::NoMatchingTask {
        task: task.metadata.name.clone().unwrap_or_default(),
        table: task.spec.table.to_string(),
        lower: task.spec.partition.lower_bound.clone(),
        upper: task.spec.partition.upper_bound.clone(),
    })
}

/// Columns whose mapping warns, at most 64 (the status stays small).
fn lossy_columns<T: PublishedTable>(t: &T) -> Vec<String> {
    t.columns()
        .iter()
        .filter(|c| c.is_lossy())
        .map(|c| c.name().to_string())
        .take(64)
        .collect()
}

/// `status.plan` of a plan.
pub fn plan_summary<P: PublishedPlan>(plan: &P) -> PlanSummary {
    PlanSummary {
        tables_total: i32::try_from(plan.tables().len()).unwrap_or(i32::MAX),
        tasks_total: i32::try_from(plan.tasks().len()).unwrap_or(i32::MAX),
        rows_estimated: plan.tables().iter().map(PublishedTable::estimated_rows).sum(),
        tables: plan
            .tables()
            .iter()
            .enumerate()
            .take(MAX_PLANNED_TABLES)
            .map(|(i, t)| {
                let (schema, name) = t.source();
                let (target_schema, target_name) = t.target();
                PlannedTable {
                    source: format!("{schema}.{name}"),
                    target: format!("{target_schema}.{target_name}"),
                    estimated_rows: t.estimated_rows(),
                    partitions: i32::try_from(plan.tasks().iter().filter(|task| task.table == i).count())
                        .unwrap_or(i32::MAX),
                    lossy_columns: lossy_columns(t),
                    target_action: None,
                }
            })
            .collect(),
    }
}
