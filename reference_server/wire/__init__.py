"""MemClaw's wire format (a bottom layer beside storage): the request models, the error
envelope, the response shapes. Imports no other layer."""
