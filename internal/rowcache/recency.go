package rowcache

func (c *Cache) touch(s int32) {
	if c.head == s {
		return
	}
	c.unlink(s)
	c.pushFront(s)
}

func (c *Cache) pushFront(s int32) {
	c.prev[s], c.next[s] = none, c.head
	if c.head != none {
		c.prev[c.head] = s
	}
	c.head = s
	if c.tail == none {
		c.tail = s
	}
}

func (c *Cache) pushBack(s int32) {
	c.prev[s], c.next[s] = c.tail, none
	if c.tail != none {
		c.next[c.tail] = s
	}
	c.tail = s
	if c.head == none {
		c.head = s
	}
}

func (c *Cache) unlink(s int32) {
	p, n := c.prev[s], c.next[s]
	switch {
	case p != none:
		c.next[p] = n
	case c.head == s:
		c.head = n
	default:
		return // not in the list
	}
	if n != none {
		c.prev[n] = p
	} else {
		c.tail = p
	}
	c.prev[s], c.next[s] = none, none
}
