//! The walk over a btree's leaf level that bitmap and index scans (and TOAST lookups)
//! share: from the metapage down the leftmost (or, in the index's order, the first)
//! downlink whose range can hold the scan's first key, then right along the leaves, each
//! link read checked against the page it leads to, and every walk bounded.

use super::*;

/// Why a btree block is being read: names the link in messages.
#[derive(Debug, Clone, Copy)]
enum Link {
    /// The metapage's (fast) root.
    Root,
    /// A downlink in an internal page.
    Downlink { from: u64 },
    /// A right link (`btpo_next`).
    Right { from: u64 },
}

impl Link {
    /// The block holding the link (the metapage for the root).
    fn holder_block(self) -> u64 {
        match self {
            Link::Root => 0,
            Link::Downlink { from } | Link::Right { from } => from,
        }
    }
}

impl std::fmt::Display for Link {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Link::Root => f.write_str("the metapage's root"),
            Link::Downlink { from } => write!(f, "a downlink in block {from}"),
            Link::Right { from } => write!(f, "the right link of block {from}"),
        }
    }
}

/// `P_IGNORE`: a deleted or half-dead page, which scans step right over.
fn is_ignorable(opaque: &BtPageOpaque) -> bool {
    opaque.is_deleted() || opaque.btpo_flags & BTP_HALF_DEAD != 0
}

/// Walks a btree's leaf level over `[lo, hi]`, one leaf at a time. Every block is entered
/// at most once (`visited`), so the walk reads at most the index's block count of pages and
/// a cycle in downlinks or right links is reported, not followed.
pub(super) struct LeafWalk<'p> {
    pool: &'p BufferPool,
    index: &'p RelFile,
    rel: RelId,
    key_type: ColumnType,
    predicate: &'p dyn KeyRange,
    /// The index's order of its first key.
    order: KeyOrder,
    /// The index's block count when the walk started: no link may point at or past it.
    nblocks: u64,
    /// Every block entered by the descent or the leaf walk.
    visited: HashSet<u64>,
    /// The next leaf and the link that leads to it.
    next_leaf: Option<(u64, Link)>,
    pub(super) pages_read: u64,
}

impl<'p> LeafWalk<'p> {
    fn corrupt(&self, block: u64, problem: String) -> ScanError {
        ScanError::IndexCorrupt {
            index: self.index.display_name().to_string(),
            block,
            problem,
        }
    }

    /// Follows `link` to `block`: refuses a block past the end, the metapage or one already
    /// entered (a cycle), then reads and checks the page as `_bt_checkpage` does.
    fn enter(
        &mut self,
        backend: &mut Backend,
        block: u64,
        link: Link,
    ) -> Result<(PinnedBuffer<'p>, BtPageOpaque), ScanError> {
        let from = link.holder_block();
        if block >= self.nblocks {
            return Err(self.corrupt(
                from,
                format!(
                    "{link} points to block {block}, past the end of the index ({} blocks)",
                    self.nblocks
                ),
            ));
        }
        if block == 0 {
            return Err(self.corrupt(from, format!("{link} points to block 0, the metapage")));
        }
        if !self.visited.insert(block) {
            return Err(self.corrupt(
                from,
                format!(
                    "{link} points back to block {block}, already visited: the links form a cycle"
                ),
            ));
        }
        let buf = self.pool.read_buffer(backend, self.rel, block, None)?;
        self.pages_read += 1;
        if is_new_page(buf.page()) {
            return Err(ScanError::IndexZeroPage {
                index: self.index.display_name().to_string(),
                block,
            });
        }
        let opaque = match BtreePage::new(buf.page()) {
            Ok(page) => *page.opaque(),
            Err(e) => {
                return Err(self.corrupt(
                    block,
                    format!("{link} leads to a page that is not a btree page ({e})"),
                ))
            }
        };
        if opaque.is_meta() {
            return Err(self.corrupt(
                block,
                format!("{link} leads to a page flagged as a metapage"),
            ));
        }
        Ok((buf, opaque))
    }

    /// [`LeafWalk::start_in_order`] on an ascending, NULLS LAST btree (a TOAST index).
    pub(super) fn start(
        pool: &'p BufferPool,
        backend: &mut Backend,
        index: &'p RelFile,
        key_type: ColumnType,
        predicate: &'p dyn KeyRange,
    ) -> Result<Self, ScanError> {
        Self::start_in_order(
            pool,
            backend,
            index,
            key_type,
            predicate,
            KeyOrder::default(),
        )
    }

    /// Descends from the root to the leaf where the range starts in the index's `order`
    /// (`_bt_first`); [`LeafWalk::next_leaf`] then reads the leaves from there.
    pub(super) fn start_in_order(
        pool: &'p BufferPool,
        backend: &mut Backend,
        index: &'p RelFile,
        key_type: ColumnType,
        predicate: &'p dyn KeyRange,
        order: KeyOrder,
    ) -> Result<Self, ScanError> {
        let nblocks = checked_nblocks(index)?;
        let rel = pool.register(index);
        let bad = |reason: String| ScanError::BadIndex {
            path: index.display_name().to_string(),
            reason,
        };
        let mut walk = LeafWalk {
            pool,
            index,
            rel,
            key_type,
            predicate,
            order,
            nblocks,
            visited: HashSet::new(),
            next_leaf: None,
            pages_read: 0,
        };
        if nblocks == 0 {
            return Err(bad(
                "the file is empty: a btree has at least its metapage".into()
            ));
        }
        let meta_buf = pool.read_buffer(backend, rel, 0, None)?;
        walk.pages_read = 1;
        if is_new_page(meta_buf.page()) {
            return Err(ScanError::IndexZeroPage {
                index: index.display_name().to_string(),
                block: 0,
            });
        }
        let meta = BtMetaPage::parse(meta_buf.page()).map_err(|e| bad(e.to_string()))?;
        drop(meta_buf);
        if meta.btm_root == 0 {
            // P_NONE: an empty index has no root.
            return Ok(walk);
        }
        if meta.btm_fastroot == 0 {
            return Err(walk.corrupt(
                0,
                format!("the metapage has root {} but fast root 0", meta.btm_root),
            ));
        }
        let mut block = meta.btm_fastroot as u64;
        let mut link = Link::Root;
        let mut level = meta.btm_fastlevel;
        // The root, and the first downlink of a leftmost page, must lead to the leftmost
        // page of the level below: a link elsewhere would silently skip the pages before it.
        let mut must_be_leftmost = true;
        // Each step enters a new block (see `enter`), so the descent reads at most the
        // index's block count of pages.
        loop {
            let (buf, opaque) = walk.enter(backend, block, link)?;
            if is_ignorable(&opaque) {
                must_be_leftmost = false;
                // A page deleted or half-dead since its parent was read: step right, as
                // `_bt_moveright` does.
                if opaque.is_rightmost() {
                    return Err(walk.corrupt(
                        block,
                        format!("{link} leads to a deleted or half-dead page with no right sibling: no live page at level {level}"),
                    ));
                }
                link = Link::Right { from: block };
                block = opaque.btpo_next as u64;
                continue;
            }
            walk.check_descent_page(block, link, level, must_be_leftmost, &opaque)?;
            if level == 0 {
                // The leaf level gets its own visited set: a right link back into the
                // descent's pages is a link to a page that is not a leaf, and is reported so.
                // The leaf is entered again by `next_leaf`, which reads its items.
                walk.visited.clear();
                walk.next_leaf = Some((block, link));
                return Ok(walk);
            }
            let (child_item, child) = walk.downlink_to_follow(buf.page(), block)?;
            must_be_leftmost = child_item == 0 && opaque.btpo_prev == 0;
            link = Link::Downlink { from: block };
            block = child as u64;
            level -= 1;
        }
    }

    /// Checks a page the descent entered through `link`: of the `level` expected, flagged
    /// a leaf exactly at level 0, and the leftmost of its level when the link must lead
    /// there.
    fn check_descent_page(
        &self,
        block: u64,
        link: Link,
        level: u32,
        must_be_leftmost: bool,
        opaque: &BtPageOpaque,
    ) -> Result<(), ScanError> {
        if opaque.btpo_level != level {
            return Err(self.corrupt(
                block,
                format!(
                    "{link} leads to a page of level {}, expected level {level}",
                    opaque.btpo_level
                ),
            ));
        }
        if opaque.is_leaf() != (level == 0) {
            return Err(self.corrupt(
                block,
                format!(
                    "page of level {level} is {}flagged as a leaf (btpo_flags {:#x})",
                    if opaque.is_leaf() { "" } else { "not " },
                    opaque.btpo_flags
                ),
            ));
        }
        if must_be_leftmost && opaque.btpo_prev != 0 {
            return Err(self.corrupt(
                link.holder_block(),
                format!(
                    "{link} must lead to the leftmost page of its level, but block {block} has a left sibling (btpo_prev {})",
                    opaque.btpo_prev
                ),
            ));
        }
        Ok(())
    }

    /// The downlink of internal page `block` the descent follows, with its item's index:
    /// that of the last pivot whose key sorts before the range in the index's order
    /// (`_bt_binsrch` on an internal page); the first item, whose keys were all truncated
    /// away, is minus infinity. A pivot's NULL key is a key like any other: after every
    /// value with NULLS LAST, before them with NULLS FIRST.
    fn downlink_to_follow(&self, page: &[u8], block: u64) -> Result<(usize, u32), ScanError> {
        let index = self.index;
        let page = BtreePage::new(page).map_err(page_err(index, block))?;
        let items = page.data_items().map_err(page_err(index, block))?;
        let mut child = None;
        for (i, (_, item)) in items.iter().enumerate() {
            let place = if item.pivot_natts() == Some(0) {
                Place::Before
            } else {
                let key = item
                    .first_key(self.key_type)
                    .map_err(page_err(index, block))?;
                self.order.place(self.predicate, key.as_ref())
            };
            if place != Place::Before {
                break;
            }
            child = Some((i, item.downlink()));
        }
        child
            .or_else(|| items.first().map(|(_, i)| (0, i.downlink())))
            .ok_or_else(|| self.corrupt(block, "internal page has no items".into()))
    }

    /// The qualifying heap TIDs of the next leaf (in key order), or `None` at the end.
    /// Deleted and half-dead leaves give no TIDs and the walk steps right over them.
    pub(super) fn next_leaf(
        &mut self,
        backend: &mut Backend,
    ) -> Result<Option<Vec<ItemPointer>>, ScanError> {
        let Some((block, link)) = self.next_leaf.take() else {
            return Ok(None);
        };
        let (buf, opaque) = self.enter(backend, block, link)?;
        let mut tids = Vec::new();
        let mut past_end = false;
        if !is_ignorable(&opaque) {
            if !opaque.is_leaf() || opaque.btpo_level != 0 {
                return Err(self.corrupt(
                    link.holder_block(),
                    format!(
                        "{link} points to block {block}, which is not a leaf (level {}, btpo_flags {:#x}): the leaf level may link only leaves",
                        opaque.btpo_level, opaque.btpo_flags
                    ),
                ));
            }
            // The sibling links must agree, as amcheck checks: a right link that skips
            // leaves would silently drop their rows.
            if let Link::Right { from } = link {
                if opaque.btpo_prev as u64 != from {
                    return Err(self.corrupt(
                        from,
                        format!(
                            "{link} points to block {block}, whose left link (btpo_prev {}) does not point back: the sibling links disagree",
                            opaque.btpo_prev
                        ),
                    ));
                }
            }
            // `_bt_readpage`: items killed by earlier scans (LP_DEAD) are skipped; each
            // live item's first key is placed against the range in the index's order.
            let page = BtreePage::new(buf.page()).map_err(page_err(self.index, block))?;
            for (_, item) in page
                .live_data_items()
                .map_err(page_err(self.index, block))?
            {
                let key = item
                    .first_key(self.key_type)
                    .map_err(page_err(self.index, block))?;
                match self.order.place(self.predicate, key.as_ref()) {
                    Place::Before => continue,
                    Place::After => {
                        past_end = true;
                        break;
                    }
                    Place::Within => {}
                }
                if key.as_ref().is_none_or(|k| self.predicate.matches(k)) {
                    tids.extend(item.heap_tids().map_err(page_err(self.index, block))?);
                }
            }
        }
        // A right link of 0 (P_NONE) ends the level, as in PostgreSQL.
        if !past_end && !opaque.is_rightmost() {
            self.next_leaf = Some((opaque.btpo_next as u64, Link::Right { from: block }));
        }
        Ok(Some(tids))
    }
}
