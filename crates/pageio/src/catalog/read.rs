//! Reading a database's catalogs: every visible row of a catalog file through the pool
//! ([`Catalog::read_rows`], [`Catalog::read_tuples`]), and [`DatabaseCatalog::read`], which
//! reads the catalogs a relation is described by, in the order each needs the one before:
//! pg_class (through the database's relation map), then pg_namespace, pg_type,
//! pg_collation and pg_am (oid → name), pg_attribute (with the missing values of columns
//! added later with a default) and pg_index.

use super::*;

impl Catalog<'_> {
    /// Every visible row of a catalog, with at least `fixed_bytes` of data each, handed to
    /// `row` (whose error is reported with the row's block and line pointer). Reads through the pool with a read stream; the file must hold whole pages
    /// and no segment after a missing one.
    pub(super) fn read_rows(
        &self,
        file: &CatalogFile,
        fixed_bytes: usize,
        mut row: impl FnMut(&[u8]) -> Result<(), String>,
    ) -> Result<(), CatalogError> {
        self.read_tuples(file, fixed_bytes, |t| row(t.data()))
    }

    /// [`Catalog::read_rows`], handing out whole tuples (null bitmap and variable-length
    /// tail included).
    pub(super) fn read_tuples(
        &self,
        file: &CatalogFile,
        fixed_bytes: usize,
        mut row: impl FnMut(&HeapTuple<'_>) -> Result<(), String>,
    ) -> Result<(), CatalogError> {
        let unreadable =
            |source: Box<dyn std::error::Error + Send + Sync>| CatalogError::CatalogUnreadable {
                catalog: file.catalog.into(),
                scope: file.scope.clone(),
                path: file.relpath.clone(),
                source,
            };
        let rel = RelFile::in_data_dir(&self.pgdata, &file.relpath, ForkNumber::Main);
        let layout = rel.segment_layout().map_err(|e| unreadable(Box::new(e)))?;
        if let Some(partial) = layout.partial_page_bytes {
            return Err(unreadable(
                format!(
                    "segment file \"{}\" is {} bytes, not a whole number of pages: its last {partial} bytes are a partial page (the file is truncated)",
                    rel.segment_display(layout.last_segno),
                    layout.last_size_bytes
                )
                .into(),
            ));
        }
        if let Some(o) = &layout.orphan {
            return Err(unreadable(
                format!(
                    "segment file \"{}\" exists after segment {} ended the relation early (of {} blocks each)",
                    rel.segment_display(o.later_segno),
                    o.ended_at_segno,
                    RELSEG_SIZE_BLOCKS
                )
                .into(),
            ));
        }
        let nblocks = layout.nblocks;
        let mut backend = self
            .pool
            .aio()
            .backend()
            .map_err(|e| unreadable(Box::new(e)))?;
        let mut next = 0u64;
        let mut stream = ReadStream::new(&self.pool, &rel, StreamOptions::default(), move || {
            (next < nblocks).then(|| {
                next += 1;
                (next - 1, ())
            })
        });
        let mut visibility = Visibility::new(Some(self.transactions.clone()));
        while let Some(buf) = stream.next(&mut backend).map_err(|e| match e {
            // The pool's advice to read past a damaged page fits a table scan, not a
            // catalog: a catalog read past a damaged page silently loses relations.
            crate::buffer::BufferError::Io(crate::aio::AioError::InvalidPage {
                path,
                block,
                detail,
            }) => unreadable(
                format!(
                    "invalid page in block {block} of relation \"{path}\": {}",
                    detail
                        .split("; set ignore_checksum_failure")
                        .next()
                        .unwrap_or("")
                )
                .into(),
            ),
            other => unreadable(Box::new(other)),
        })? {
            let block = buf.block;
            let page = buf.page();
            // A new (all-zero) page holds no rows, as PostgreSQL's PageIsNew.
            if page[14..16] == [0, 0] {
                continue;
            }
            let bad_row = |offset: u16, problem: String| CatalogError::CatalogRow {
                catalog: file.catalog.into(),
                scope: file.scope.clone(),
                path: file.relpath.clone(),
                block,
                offset,
                problem,
            };
            let p = PageRef::new(page).map_err(|e| bad_row(0, e.to_string()))?;
            for (off, id) in p.item_ids() {
                if id.lp_flags != LinePointerFlags::Normal {
                    continue;
                }
                let bytes = p
                    .item_bytes(off, id)
                    .map_err(|e| bad_row(off, e.to_string()))?;
                let tuple = HeapTuple::parse(bytes).map_err(|e| bad_row(off, e.to_string()))?;
                if !visibility
                    .satisfies_mvcc(tuple.header())
                    .map_err(|e| bad_row(off, e.to_string()))?
                {
                    continue;
                }
                let data = tuple.data();
                if data.len() < fixed_bytes {
                    return Err(bad_row(
                        off,
                        format!(
                            "the row has {} bytes of data, fewer than the {fixed_bytes} of the catalog's fixed-width columns: the row is corrupt",
                            data.len()
                        ),
                    ));
                }
                row(&tuple).map_err(|problem| bad_row(off, problem))?;
            }
        }
        Ok(())
    }
}

impl DatabaseCatalog {
    /// Reads the catalogs of `database` in `cluster`.
    pub(super) fn read(
        cluster: &Catalog<'_>,
        database: Database,
    ) -> Result<DatabaseCatalog, CatalogError> {
        let scope = format!("database \"{}\"", database.name);
        let map_path = format!("base/{}/pg_filenode.map", database.oid);
        let db_map = RelMap::read(&cluster.pgdata.join(&map_path), &map_path)?;
        let global_path = "global/pg_filenode.map";
        let global_map = RelMap::read(&cluster.pgdata.join(global_path), global_path)?;
        let mut cat = DatabaseCatalog {
            database,
            catversion: cluster.catversion,
            horizons: cluster.transactions.horizons(),
            db_map,
            global_map,
            classes: HashMap::new(),
            namespaces: HashMap::new(),
            attributes: HashMap::new(),
            type_names: HashMap::new(),
            collation_names: HashMap::new(),
            indexes: HashMap::new(),
            access_methods: HashMap::new(),
        };
        cat.classes = cat.read_classes(cluster, &scope, &map_path)?;
        let file = cat.catalog_file(&scope, "pg_namespace", rows::pg_namespace::OID)?;
        cat.namespaces = read_oid_names(
            cluster,
            &file,
            rows::pg_namespace::FIXED_BYTES,
            rows::pg_namespace::NSPNAME,
        )?;
        let file = cat.catalog_file(&scope, "pg_type", rows::pg_type::OID)?;
        cat.type_names = read_oid_names(
            cluster,
            &file,
            rows::pg_type::FIXED_BYTES,
            rows::pg_type::TYPNAME,
        )?;
        let file = cat.catalog_file(&scope, "pg_collation", rows::pg_collation::OID)?;
        cat.collation_names = read_oid_names(
            cluster,
            &file,
            rows::pg_collation::FIXED_BYTES,
            rows::pg_collation::COLLNAME,
        )?;
        let file = cat.catalog_file(&scope, "pg_am", rows::pg_am::OID)?;
        cat.access_methods = read_oid_names(
            cluster,
            &file,
            rows::pg_am::FIXED_BYTES,
            rows::pg_am::AMNAME,
        )?;
        let file = cat.catalog_file(&scope, "pg_attribute", rows::pg_attribute::OID)?;
        cat.attributes = cat.read_attributes(cluster, &file, &scope)?;
        let file = cat.catalog_file(&scope, "pg_index", rows::pg_index::OID)?;
        cat.indexes = read_indexes(cluster, &file, cat.attributes.get(&rows::pg_index::OID))?;
        Ok(cat)
    }

    /// pg_class, found through the database's relation map (it is a mapped catalog).
    fn read_classes(
        &self,
        cluster: &Catalog<'_>,
        scope: &str,
        map_path: &str,
    ) -> Result<HashMap<u32, ClassRow>, CatalogError> {
        let class_file = CatalogFile {
            catalog: "pg_class",
            scope: scope.to_string(),
            relpath: self.relpath(
                0,
                self.db_map.filenumber(rows::pg_class::OID).ok_or_else(|| {
                    CatalogError::MissingMapping {
                        path: map_path.to_string(),
                        catalog: "pg_class".into(),
                        oid: rows::pg_class::OID,
                    }
                })?,
            ),
        };
        let mut classes = Vec::new();
        cluster.read_rows(&class_file, rows::pg_class::FIXED_BYTES, |d| {
            use rows::pg_class::*;
            classes.push(ClassRow {
                oid: u32_at(d, 0),
                name: name_at(d, RELNAME),
                namespace: u32_at(d, RELNAMESPACE),
                owner: u32_at(d, RELOWNER),
                am: u32_at(d, RELAM),
                filenode: u32_at(d, RELFILENODE),
                tablespace: u32_at(d, RELTABLESPACE),
                relpages: i32_at(d, RELPAGES),
                reltuples: f32_at(d, RELTUPLES),
                toast: u32_at(d, RELTOASTRELID),
                shared: d[RELISSHARED] != 0,
                persistence: d[RELPERSISTENCE],
                kind: RelKind::from_byte(d[RELKIND]),
                is_partition: d[RELISPARTITION] != 0,
            });
            Ok(())
        })?;
        check_unique(&class_file, classes.iter().map(|c| c.oid))?;
        Ok(classes.into_iter().map(|c| (c.oid, c)).collect())
    }

    /// The file of catalog `catalog` (its pg_class oid `oid`), once pg_class is read.
    fn catalog_file(
        &self,
        scope: &str,
        catalog: &'static str,
        oid: u32,
    ) -> Result<CatalogFile, CatalogError> {
        let path = self
            .storage_path(oid)?
            .ok_or_else(|| CatalogError::MissingRow {
                catalog: "pg_class".into(),
                scope: scope.to_string(),
                what: format!("a file of catalog {catalog} (oid {oid})"),
            })?;
        Ok(CatalogFile {
            catalog,
            scope: scope.to_string(),
            relpath: path,
        })
    }

    /// pg_attribute: each relation's user columns in attnum order, with type and collation
    /// names and the missing values of columns added later with a default.
    fn read_attributes(
        &self,
        cluster: &Catalog<'_>,
        file: &CatalogFile,
        scope: &str,
    ) -> Result<HashMap<u32, Vec<AttRow>>, CatalogError> {
        let mut attributes: HashMap<u32, Vec<AttRow>> = HashMap::new();
        let type_names = &self.type_names;
        let collation_names = &self.collation_names;
        // Rows with atthasmissing, whole: their attmissingval is decoded once pg_attribute's
        // own descriptor (its rows for relation 1249) has been read.
        let mut with_missing: Vec<(u32, i16, i16, Vec<u8>)> = Vec::new();
        cluster.read_tuples(file, rows::pg_attribute::FIXED_BYTES, |t| {
            use rows::pg_attribute::*;
            let d = t.data();
            if d[ATTHASMISSING] != 0 && i16_at(d, ATTNUM) > 0 {
                with_missing.push((
                    u32_at(d, ATTRELID),
                    i16_at(d, ATTNUM),
                    i16_at(d, ATTLEN),
                    t.bytes().to_vec(),
                ));
            }
            let attnum = i16_at(d, ATTNUM);
            if attnum <= 0 {
                return Ok(()); // system columns (ctid, xmin, …)
            }
            let type_oid = u32_at(d, ATTTYPID);
            attributes
                .entry(u32_at(d, ATTRELID))
                .or_default()
                .push(AttRow {
                    attnum,
                    column: Column {
                        attnum,
                        name: name_at(d, ATTNAME),
                        type_name: type_names.get(&type_oid).cloned(),
                        type_oid,
                        attlen: i16_at(d, ATTLEN),
                        attalign: d[ATTALIGN] as char,
                        attbyval: d[ATTBYVAL] != 0,
                        attnotnull: d[ATTNOTNULL] != 0,
                        dropped: d[ATTISDROPPED] != 0,
                        atthasmissing: d[ATTHASMISSING] != 0,
                        missing_value: None,
                        collation_oid: u32_at(d, ATTCOLLATION),
                        collation_name: collation_names.get(&u32_at(d, ATTCOLLATION)).cloned(),
                    },
                });
            Ok(())
        })?;
        for (relid, atts) in attributes.iter_mut() {
            atts.sort_by_key(|a| a.attnum);
            if let Some(w) = atts.windows(2).find(|w| w[0].attnum == w[1].attnum) {
                return Err(CatalogError::DuplicateRow {
                    catalog: "pg_attribute".into(),
                    scope: scope.to_string(),
                    what: format!("attribute {} of relation oid {relid}", w[0].attnum),
                });
            }
        }
        fill_missing_values(&mut attributes, with_missing, scope)?;
        Ok(attributes)
    }
}

/// A catalog of (oid, name) rows with the name at `name_offset` (pg_namespace, pg_type,
/// pg_collation, pg_am), as a map; an oid seen twice is an error.
fn read_oid_names(
    cluster: &Catalog<'_>,
    file: &CatalogFile,
    fixed_bytes: usize,
    name_offset: usize,
) -> Result<HashMap<u32, String>, CatalogError> {
    let mut names = Vec::new();
    cluster.read_rows(file, fixed_bytes, |d| {
        names.push((u32_at(d, 0), name_at(d, name_offset)));
        Ok(())
    })?;
    check_unique(file, names.iter().map(|n| n.0))?;
    Ok(names.into_iter().collect())
}

/// Decodes the attmissingval of each row in `with_missing` (relation oid, attnum, attlen,
/// the whole tuple) with pg_attribute's own descriptor and sets it on its column.
fn fill_missing_values(
    attributes: &mut HashMap<u32, Vec<AttRow>>,
    with_missing: Vec<(u32, i16, i16, Vec<u8>)>,
    scope: &str,
) -> Result<(), CatalogError> {
    if with_missing.is_empty() {
        return Ok(());
    }
    let own = attributes
        .get(&rows::pg_attribute::OID)
        .cloned()
        .unwrap_or_default();
    for (relid, attnum, attlen, bytes) in with_missing {
        let bad = |problem: String| {
            CatalogError::MissingRow {
            catalog: "pg_attribute".into(),
            scope: scope.to_string(),
            what: format!("a readable attmissingval of attribute {attnum} of relation oid {relid} ({problem})"),
        }
        };
        let value = missing_value(&own, &bytes, attlen).map_err(bad)?;
        if let Some(att) = attributes
            .get_mut(&relid)
            .and_then(|atts| atts.iter_mut().find(|a| a.attnum == attnum))
        {
            att.column.missing_value = value;
        }
    }
    Ok(())
}

/// pg_index, by table. indcollation, indoption and indpred follow indkey, so the rows are
/// deformed with pg_index's own descriptor (`own_attributes`, its pg_attribute rows).
fn read_indexes(
    cluster: &Catalog<'_>,
    file: &CatalogFile,
    own_attributes: Option<&Vec<AttRow>>,
) -> Result<HashMap<u32, Vec<IndexRow>>, CatalogError> {
    let mut indexes: HashMap<u32, Vec<IndexRow>> = HashMap::new();
    let own = pg_index_desc(own_attributes);
    cluster.read_tuples(file, rows::pg_index::FIXED_BYTES, |t| {
        use rows::pg_index::*;
        let d = t.data();
        let oid = u32_at(d, INDEXRELID);
        let nkey = i16_at(d, INDNKEYATTS).max(0) as usize;
        let keys = int2vector_at(d, INDKEY)
            .map_err(|problem| format!("index oid {oid}: {problem}: the row is corrupt"))?;
        let tail = index_row_tail(own.as_ref(), t, nkey)
            .map_err(|problem| format!("index oid {oid}: {problem}: the row is corrupt"))?;
        let row = IndexRow {
            index: oid,
            table: u32_at(d, INDRELID),
            key_atts: keys.into_iter().take(nkey).collect(),
            unique: d[INDISUNIQUE] != 0,
            primary: d[INDISPRIMARY] != 0,
            valid: d[INDISVALID] != 0,
            key_options: tail.key_options,
            key_collations: tail.key_collations,
            predicate: tail.predicate,
        };
        indexes.entry(row.table).or_default().push(row);
        Ok(())
    })?;
    Ok(indexes)
}
