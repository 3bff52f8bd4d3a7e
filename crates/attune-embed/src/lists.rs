//! A slab of doubly linked lists: O(1) push, remove, move and pop over node ids. Every node
//! belongs to exactly one list; the policies use one list per queue (LRU, ARC's four) or per
//! group score (EV-LFU, EV-ARC's F-list). Each node carries one `aux` word for the policy.

const NIL: u32 = u32::MAX;

#[derive(Clone, Debug)]
struct Node {
    key: u64,
    prev: u32,
    next: u32,
    list: u32,
    /// Free per-node value for the policy (a group score, a reference bit, a frequency).
    aux: u32,
}

/// Bytes of one node (what every entry of a list costs, resident or ghost).
pub const NODE_BYTES: usize = std::mem::size_of::<Node>();

#[derive(Clone, Copy, Debug)]
struct Ends {
    head: u32,
    tail: u32,
    len: usize,
}

/// `lists` doubly linked lists over one node slab. Front = oldest, back = newest.
#[derive(Clone, Debug)]
pub struct Lists {
    nodes: Vec<Node>,
    free: Vec<u32>,
    ends: Vec<Ends>,
}

impl Lists {
    /// `lists` empty lists.
    pub fn new(lists: usize) -> Self {
        Lists {
            nodes: Vec::new(),
            free: Vec::new(),
            ends: vec![
                Ends {
                    head: NIL,
                    tail: NIL,
                    len: 0
                };
                lists
            ],
        }
    }

    /// Length of list `l`.
    #[inline]
    pub fn len(&self, l: usize) -> usize {
        self.ends[l].len
    }

    /// The list node `id` is in.
    #[inline]
    pub fn list_of(&self, id: u32) -> usize {
        self.nodes[id as usize].list as usize
    }

    /// The key of node `id`.
    #[inline]
    pub fn key(&self, id: u32) -> u64 {
        self.nodes[id as usize].key
    }

    /// The policy's value of node `id` (0 when pushed).
    #[inline]
    pub fn aux(&self, id: u32) -> u32 {
        self.nodes[id as usize].aux
    }

    /// Sets the policy's value of node `id`.
    #[inline]
    pub fn set_aux(&mut self, id: u32, v: u32) {
        self.nodes[id as usize].aux = v;
    }

    /// The oldest node of list `l`.
    #[inline]
    pub fn front(&self, l: usize) -> Option<u32> {
        let h = self.ends[l].head;
        (h != NIL).then_some(h)
    }

    /// Appends `key` to the back of list `l`; returns its node id.
    pub fn push_back(&mut self, l: usize, key: u64) -> u32 {
        let node = Node {
            key,
            prev: NIL,
            next: NIL,
            list: l as u32,
            aux: 0,
        };
        let id = if let Some(id) = self.free.pop() {
            self.nodes[id as usize] = node;
            id
        } else {
            self.nodes.push(node);
            (self.nodes.len() - 1) as u32
        };
        self.link_back(l, id);
        id
    }

    fn link_back(&mut self, l: usize, id: u32) {
        let tail = self.ends[l].tail;
        {
            let n = &mut self.nodes[id as usize];
            n.prev = tail;
            n.next = NIL;
            n.list = l as u32;
        }
        if tail == NIL {
            self.ends[l].head = id;
        } else {
            self.nodes[tail as usize].next = id;
        }
        self.ends[l].tail = id;
        self.ends[l].len += 1;
    }

    fn unlink(&mut self, id: u32) {
        let Node {
            prev, next, list, ..
        } = self.nodes[id as usize];
        let l = list as usize;
        if prev == NIL {
            self.ends[l].head = next;
        } else {
            self.nodes[prev as usize].next = next;
        }
        if next == NIL {
            self.ends[l].tail = prev;
        } else {
            self.nodes[next as usize].prev = prev;
        }
        self.ends[l].len -= 1;
    }

    /// Moves node `id` to the back of list `l` (its own list or another).
    pub fn move_back(&mut self, id: u32, l: usize) {
        self.unlink(id);
        self.link_back(l, id);
    }

    /// The node after `id` in its list read as a ring (the back's successor is the front).
    /// CLOCK-Pro's hands walk a list this way.
    #[inline]
    pub fn ring_next(&self, id: u32) -> u32 {
        let n = self.nodes[id as usize].next;
        if n == NIL {
            self.ends[self.nodes[id as usize].list as usize].head
        } else {
            n
        }
    }

    /// Inserts `key` just before node `at`, in `at`'s list; returns its node id.
    pub fn insert_before(&mut self, at: u32, key: u64) -> u32 {
        let l = self.list_of(at);
        let id = self.push_back(l, key);
        self.move_before(id, at);
        id
    }

    /// Moves node `id` just before node `at` (`id != at`), into `at`'s list.
    pub fn move_before(&mut self, id: u32, at: u32) {
        debug_assert_ne!(id, at);
        self.unlink(id);
        let l = self.nodes[at as usize].list;
        let prev = self.nodes[at as usize].prev;
        {
            let n = &mut self.nodes[id as usize];
            n.prev = prev;
            n.next = at;
            n.list = l;
        }
        if prev == NIL {
            self.ends[l as usize].head = id;
        } else {
            self.nodes[prev as usize].next = id;
        }
        self.nodes[at as usize].prev = id;
        self.ends[l as usize].len += 1;
    }

    /// Removes node `id`; returns its key. The id may be reused.
    pub fn remove(&mut self, id: u32) -> u64 {
        self.unlink(id);
        self.free.push(id);
        self.nodes[id as usize].key
    }

    /// Removes and returns the oldest key of list `l`.
    pub fn pop_front(&mut self, l: usize) -> Option<u64> {
        let id = self.front(l)?;
        Some(self.remove(id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_keep_order() {
        let mut l = Lists::new(2);
        let a = l.push_back(0, 1);
        l.push_back(0, 2);
        l.push_back(0, 3);
        l.move_back(a, 0);
        assert_eq!(l.pop_front(0), Some(2));
        let c = l.front(0).unwrap();
        l.move_back(c, 1);
        assert_eq!((l.len(0), l.len(1)), (1, 1));
        assert_eq!(l.pop_front(0), Some(1));
        assert_eq!(l.pop_front(0), None);
        assert_eq!(l.pop_front(1), Some(3));
        l.push_back(1, 9);
        assert_eq!(l.pop_front(1), Some(9));
        // Ring walk and insertion before a node.
        let a = l.push_back(0, 1);
        let b = l.push_back(0, 2);
        let c = l.insert_before(b, 3);
        assert_eq!((l.ring_next(a), l.ring_next(c), l.ring_next(b)), (c, b, a));
        l.move_before(b, a);
        assert_eq!(l.front(0), Some(b));
        assert_eq!((l.ring_next(b), l.ring_next(c)), (a, b));
        assert_eq!(l.len(0), 3);
    }
}
