//! A database's relations as the rest of the library sees them ([`Relation`]: columns,
//! indexes, TOAST, files), built from the catalog rows [`DatabaseCatalog`] holds, and found
//! by oid, by name, or all tables at once.

use super::*;

impl DatabaseCatalog {
    /// The database.
    pub fn database(&self) -> &Database {
        &self.database
    }

    fn scope(&self) -> String {
        format!("database \"{}\"", self.database.name)
    }

    /// The relative path of a relation's main fork in `tablespace` (0: the database's).
    pub(super) fn relpath(&self, tablespace: u32, filenode: u32) -> String {
        let spc = if tablespace == 0 {
            self.database.tablespace_oid
        } else {
            tablespace
        };
        match spc {
            GLOBAL_TABLESPACE_OID => format!("global/{filenode}"),
            DEFAULT_TABLESPACE_OID => format!("base/{}/{filenode}", self.database.oid),
            spc => format!(
                "pg_tblspc/{spc}/{TABLESPACE_VERSION_PREFIX}{}/{}/{filenode}",
                self.catversion, self.database.oid
            ),
        }
    }

    /// The file number of a relation: its relfilenode, or the mapper's entry (0 without
    /// storage).
    fn filenode(&self, c: &ClassRow) -> Result<u32, CatalogError> {
        if c.filenode != 0 || !c.kind.has_storage() {
            return Ok(c.filenode);
        }
        let (map, path) = if c.shared {
            (&self.global_map, "global/pg_filenode.map".to_string())
        } else {
            (
                &self.db_map,
                format!("base/{}/pg_filenode.map", self.database.oid),
            )
        };
        map.filenumber(c.oid).ok_or(CatalogError::MissingMapping {
            path,
            catalog: c.name.clone(),
            oid: c.oid,
        })
    }

    /// The main fork of relation `oid`, or `None` without storage or for a temporary
    /// relation.
    pub(super) fn storage_path(&self, oid: u32) -> Result<Option<String>, CatalogError> {
        let c = self.class(oid)?;
        if !c.kind.has_storage() || c.persistence == b't' {
            return Ok(None);
        }
        let filenode = self.filenode(c)?;
        Ok(Some(self.relpath(c.tablespace, filenode)))
    }

    fn class(&self, oid: u32) -> Result<&ClassRow, CatalogError> {
        self.classes
            .get(&oid)
            .ok_or_else(|| CatalogError::MissingRow {
                catalog: "pg_class".into(),
                scope: self.scope(),
                what: format!("relation oid {oid}"),
            })
    }

    fn namespace(&self, oid: u32) -> Result<&str, CatalogError> {
        self.namespaces
            .get(&oid)
            .map(|s| s.as_str())
            .ok_or_else(|| CatalogError::MissingRow {
                catalog: "pg_namespace".into(),
                scope: self.scope(),
                what: format!("namespace oid {oid}"),
            })
    }

    /// Relation `oid`, fully resolved.
    pub fn relation(&self, oid: u32) -> Result<Relation, CatalogError> {
        let c = self.class(oid)?;
        let columns: Vec<Column> = self
            .attributes
            .get(&oid)
            .map(|a| a.iter().map(|a| a.column.clone()).collect())
            .unwrap_or_default();
        let toast = if c.toast != 0 {
            let t = self.class(c.toast)?;
            let index_path = match self.indexes.get(&t.oid).and_then(|i| i.first()) {
                Some(i) => self.storage_path(i.index)?,
                None => None,
            };
            Some(Toast {
                oid: t.oid,
                name: t.name.clone(),
                path: self.storage_path(t.oid)?,
                index_path,
            })
        } else {
            None
        };
        let mut indexes = Vec::new();
        for row in self.indexes.get(&oid).into_iter().flatten() {
            let ic = self.class(row.index)?;
            let access_method = self.access_methods.get(&ic.am).cloned().ok_or_else(|| {
                CatalogError::MissingRow {
                    catalog: "pg_am".into(),
                    scope: self.scope(),
                    what: format!("access method oid {} of index \"{}\"", ic.am, ic.name),
                }
            })?;
            let key_columns = row
                .key_atts
                .iter()
                .map(|&n| {
                    columns
                        .iter()
                        .find(|col| col.attnum == n)
                        .map(|col| col.name.clone())
                })
                .collect();
            indexes.push(Index {
                oid: ic.oid,
                name: ic.name.clone(),
                schema: self.namespace(ic.namespace)?.to_string(),
                access_method,
                path: self.storage_path(ic.oid)?,
                key_columns,
                is_unique: row.unique,
                is_primary: row.primary,
                is_valid: row.valid,
                relpages: ic.relpages,
                key_options: row.key_options.clone(),
                key_collations: row.key_collations.clone(),
                key_collation_names: row
                    .key_collations
                    .iter()
                    .map(|c| self.collation_names.get(c).cloned())
                    .collect(),
                predicate: row.predicate.clone(),
            });
        }
        indexes.sort_by(|a, b| a.name.cmp(&b.name));
        let filenode = self.filenode(c)?;
        let access_method = match c.am {
            0 => None,
            am => Some(self.access_methods.get(&am).cloned().ok_or_else(|| {
                CatalogError::MissingRow {
                    catalog: "pg_am".into(),
                    scope: self.scope(),
                    what: format!("access method oid {am} of relation \"{}\"", c.name),
                }
            })?),
        };
        Ok(Relation {
            database: self.database.name.clone(),
            oid,
            schema: self.namespace(c.namespace)?.to_string(),
            name: c.name.clone(),
            kind: c.kind,
            persistence: c.persistence as char,
            is_partition: c.is_partition,
            owner_oid: c.owner,
            access_method,
            relpages: c.relpages,
            reltuples: c.reltuples,
            tablespace_oid: if c.tablespace == 0 {
                self.database.tablespace_oid
            } else {
                c.tablespace
            },
            filenode,
            path: self.storage_path(oid)?,
            columns,
            toast,
            indexes,
            horizons: self.horizons,
        })
    }

    /// The relation named `name` in `schema`; without a schema, pg_catalog, then public,
    /// then the only schema holding that name (several: [`CatalogError::Ambiguous`]).
    pub fn find(&self, schema: Option<&str>, name: &str) -> Result<Relation, CatalogError> {
        let mut found: Vec<(&str, u32)> = Vec::new();
        for c in self.classes.values().filter(|c| c.name == name) {
            let nsp = self.namespace(c.namespace)?;
            if schema.is_none_or(|s| s == nsp) {
                found.push((nsp, c.oid));
            }
        }
        let not_found = || CatalogError::NoRelation {
            database: self.database.name.clone(),
            name: match schema {
                Some(s) => crate::sql::quote_qualified(&[s, name]),
                None => crate::sql::quote_identifier(name),
            },
        };
        let oid = match found.len() {
            0 => return Err(not_found()),
            1 => found[0].1,
            _ => match ["pg_catalog", "public"]
                .iter()
                .find_map(|p| found.iter().find(|(s, _)| s == p))
            {
                Some((_, oid)) => *oid,
                None => {
                    let mut schemas: Vec<String> =
                        found.iter().map(|(s, _)| s.to_string()).collect();
                    schemas.sort();
                    return Err(CatalogError::Ambiguous {
                        database: self.database.name.clone(),
                        name: name.into(),
                        schemas,
                    });
                }
            },
        };
        self.relation(oid)
    }

    /// What `\dt+ *.*` lists, system schemas left out: tables and partitioned tables
    /// (partitions included) outside pg_catalog, information_schema, pg_toast and temporary
    /// schemas, by schema and name.
    pub fn tables(&self) -> Result<Vec<Relation>, CatalogError> {
        let mut out = Vec::new();
        for c in self.classes.values() {
            if !matches!(c.kind, RelKind::Table | RelKind::PartitionedTable) {
                continue;
            }
            let nsp = self.namespace(c.namespace)?;
            if SYSTEM_SCHEMAS.contains(&nsp)
                || nsp.starts_with("pg_toast")
                || nsp.starts_with("pg_temp_")
            {
                continue;
            }
            out.push(self.relation(c.oid)?);
        }
        out.sort_by(|a, b| (&a.schema, &a.name).cmp(&(&b.schema, &b.name)));
        Ok(out)
    }
}
