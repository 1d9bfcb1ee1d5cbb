"""Who may do what (above storage): the scope predicate (Inv-Scope), credentials, behaviour
profiles, rate limits."""
