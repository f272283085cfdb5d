"""Reading ELF files: headers, the dynamic section, symbols."""
