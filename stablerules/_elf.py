"""Stored kernels' object code mapped and linked in this process, without LLVM.

A kernel's object code (``_objectcode``) is a 64-bit little-endian ELF relocatable object.
llvmlite's MCJIT can load it, but importing ``llvmlite.binding`` (LLVM's shared library, about
25 ms on this project's machines) was most of what a fresh process paid before its first
gradient. :func:`load` does here what MCJIT's dynamic linker does for these objects, on the one
machine it knows (x86-64, :func:`loadable`); any other object keeps the MCJIT path.

What it does, as MCJIT does:

- Every allocated section but the unwind tables is copied into one anonymous mapping, in three
  page-aligned groups: code (then read and execute), constants (read only), and writable data
  with the COMMON symbols (Numba's environment pointers) and zeroed sections (read and write).
- Undefined symbols are resolved by the caller's ``resolve(name)`` (Numba's runtime symbols
  first, then the process's, as MCJIT's lookup does). Every one is resolved before anything is
  mapped: a symbol that does not resolve refuses the object (MCJIT would abort the process).
- The relocations of the loaded sections are applied: absolute 64 and 32-bit, and PC-relative
  64 and 32-bit (the 32-bit ones only when the value fits). Numba's objects use the large code
  model, whose code needs only the absolute 64-bit kind.

Decisions:

- Anything this loader does not know (another machine or ELF class, a relocation kind such as
  a GOT entry, a section index past the reserved range, a value that does not fit) raises
  :class:`Unsupported` before any memory is mapped; ``_objectcode`` checks each object with
  :func:`check` before storing it, so a stored file is one this loader can load.
- The unwind tables (``.eh_frame``) are not registered. They serve C++ exceptions and native
  unwinders walking through a kernel's frame; a kernel reports errors to Python through its
  return code, never by unwinding. A native profiler sees these frames as it sees any JIT code
  without tables.
- A weak symbol the object defines is its own definition (nothing else is loaded beside it).
- The mapping lives as long as the :class:`Image`; the functions made from it hold it.
"""

from __future__ import annotations

import struct
import sys
from collections.abc import Callable

_EM_X86_64 = 62
_ET_REL = 1
_SHT_SYMTAB = 2
_SHT_RELA = 4
_SHT_NOBITS = 8
_SHT_REL = 9
_SHT_X86_64_UNWIND = 0x70000001
_SHF_WRITE = 0x1
_SHF_ALLOC = 0x2
_SHF_EXECINSTR = 0x4
_SHN_UNDEF = 0
_SHN_LORESERVE = 0xFF00
_SHN_ABS = 0xFFF1
_SHN_COMMON = 0xFFF2
_STB_LOCAL = 0
_STB_WEAK = 2

# x86-64 relocation kinds: (size in bytes, PC-relative, signed when 32-bit).
_R_X86_64_64 = 1
_R_X86_64_PC32 = 2
_R_X86_64_PLT32 = 4
_R_X86_64_32 = 10
_R_X86_64_32S = 11
_R_X86_64_PC64 = 24
_RELOCATIONS = {
    _R_X86_64_64: (8, False),
    _R_X86_64_PC64: (8, True),
    _R_X86_64_PC32: (4, True),
    _R_X86_64_PLT32: (4, True),
    _R_X86_64_32: (4, False),
    _R_X86_64_32S: (4, False),
}

_PROT_READ, _PROT_WRITE, _PROT_EXEC = 1, 2, 4
_MAP_PRIVATE, _MAP_ANONYMOUS = 0x02, 0x20  # Linux


class Unsupported(ValueError):
    """An object this loader cannot load (say why): nothing was mapped."""


class _Section:
    __slots__ = ("name", "kind", "flags", "offset", "size", "link", "info", "align", "entry_size", "place")
    name: int
    kind: int
    flags: int
    offset: int
    size: int
    link: int
    info: int
    align: int
    entry_size: int
    place: int

    def __init__(self, fields: tuple[int, ...]) -> None:
        (self.name, self.kind, self.flags, _, self.offset, self.size, self.link, self.info, self.align, self.entry_size) = fields
        self.place = -1  # offset in the image; -1: not loaded


class _Symbol:
    __slots__ = ("name", "bind", "section", "value", "size")
    name: str
    bind: int
    section: int
    value: int
    size: int

    def __init__(self, name: str, bind: int, section: int, value: int, size: int) -> None:
        self.name, self.bind, self.section, self.value, self.size = name, bind, section, value, size


class _Object:
    """An object file's sections, symbols and relocations, read and checked."""

    def __init__(self, obj: bytes) -> None:
        if len(obj) < 64 or obj[:4] != b"\x7fELF" or obj[4] != 2 or obj[5] != 1:
            raise Unsupported("not a 64-bit little-endian ELF object")
        kind, machine = struct.unpack_from("<HH", obj, 0x10)
        if kind != _ET_REL or machine != _EM_X86_64:
            raise Unsupported(f"an ELF object of type {kind} for machine {machine}, not an x86-64 relocatable")
        try:
            (section_offset,) = struct.unpack_from("<Q", obj, 0x28)
            section_size, section_count = struct.unpack_from("<HH", obj, 0x3A)
            self.sections = [
                _Section(struct.unpack_from("<IIQQQQIIQQ", obj, section_offset + index * section_size))
                for index in range(section_count)
            ]
            self.symbols: list[_Symbol] = []
            symtabs = [index for index, section in enumerate(self.sections) if section.kind == _SHT_SYMTAB]
            if len(symtabs) > 1:
                raise Unsupported("more than one symbol table")
            self.symtab = symtabs[0] if symtabs else -1
            for index in symtabs:
                table = self.sections[index]
                strings = self.sections[table.link].offset
                for start in range(table.offset, table.offset + table.size, table.entry_size or 24):
                    name, info, _, shndx, value, size = struct.unpack_from("<IBBHQQ", obj, start)
                    end = obj.index(b"\0", strings + name)
                    self.symbols.append(_Symbol(obj[strings + name : end].decode(), info >> 4, shndx, value, size))
            # (section loaded into, [(offset, kind, symbol, addend)])
            self.relocations: list[tuple[int, list[tuple[int, int, int, int]]]] = []
            for section in self.sections:
                if section.kind == _SHT_REL:
                    raise Unsupported("REL relocations (x86-64 objects use RELA)")
                if section.kind != _SHT_RELA:
                    continue
                if section.link != self.symtab:
                    raise Unsupported("relocations against another symbol table")
                entries = []
                for start in range(section.offset, section.offset + section.size, section.entry_size or 24):
                    offset, info, addend = struct.unpack_from("<QQq", obj, start)
                    entries.append((offset, info & 0xFFFFFFFF, info >> 32, addend))
                self.relocations.append((section.info, entries))
        except (struct.error, IndexError, UnicodeDecodeError) as error:
            raise Unsupported(f"malformed ELF object ({error})") from error

    def loaded(self, section: _Section) -> bool:
        return bool(section.flags & _SHF_ALLOC) and section.kind != _SHT_X86_64_UNWIND and section.size > 0

    def check(self) -> None:
        """Raise :class:`Unsupported` for anything :func:`load` cannot do."""
        for symbol in self.symbols:
            if _SHN_LORESERVE <= symbol.section and symbol.section not in (_SHN_ABS, _SHN_COMMON):
                raise Unsupported(f"symbol {symbol.name!r} in reserved section {symbol.section:#x}")
            if 0 < symbol.section < _SHN_LORESERVE and symbol.section >= len(self.sections):
                raise Unsupported(f"symbol {symbol.name!r} in section {symbol.section}, past the last")
        for target, entries in self.relocations:
            if not 0 <= target < len(self.sections):
                raise Unsupported(f"relocations for section {target}, past the last")
            section = self.sections[target]
            if not self.loaded(section):
                continue
            for offset, kind, symbol_index, _ in entries:
                if kind not in _RELOCATIONS:
                    raise Unsupported(f"relocation kind {kind} (x86-64) is not supported")
                if symbol_index >= len(self.symbols) or offset + _RELOCATIONS[kind][0] > section.size:
                    raise Unsupported("a relocation outside its section or symbol table")


def native(obj: bytes) -> bool:
    """Whether ``obj`` is this loader's to load: an x86-64 relocatable ELF object, in a Linux
    process (the mapping flags are Linux's). Decided by the file's header alone, so a stored
    kernel always goes the same way."""
    return (
        sys.platform.startswith("linux")
        and obj[:6] == b"\x7fELF\x02\x01"
        and len(obj) >= 64
        and struct.unpack_from("<HH", obj, 0x10) == (_ET_REL, _EM_X86_64)
    )


def loadable(obj: bytes) -> bool:
    """Whether :func:`load` can load ``obj`` (an x86-64 relocatable object of the kinds above)."""
    try:
        _Object(obj).check()
    except Unsupported:
        return False
    return True


class _Libc:
    """``mmap``, ``mprotect`` and ``munmap`` of the C library, and the process's symbols."""

    def __init__(self) -> None:
        import ctypes

        self.ctypes = ctypes
        self.process = ctypes.CDLL(None, use_errno=True)
        self.mmap = self.process.mmap
        self.mmap.restype = ctypes.c_void_p
        self.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
        self.mprotect = self.process.mprotect
        self.mprotect.restype = ctypes.c_int
        self.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        self.munmap = self.process.munmap
        self.munmap.restype = ctypes.c_int
        self.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]

    def symbol(self, name: str) -> int:
        """The address of ``name`` in the process (``dlsym``), 0 when it has none."""
        try:
            function = self.process[name]
        except AttributeError:
            return 0
        address = self.ctypes.cast(function, self.ctypes.c_void_p).value
        return int(address or 0)


_libc: _Libc | None = None


def _get_libc() -> _Libc:
    global _libc
    if _libc is None:
        _libc = _Libc()
    return _libc


def process_symbol(name: str) -> int:
    """The address the process's own symbol ``name`` has (``dlsym(RTLD_DEFAULT)``), or 0."""
    return _get_libc().symbol(name)


class Image:
    """A loaded object: its mapping and the addresses of its global symbols."""

    __slots__ = ("_address", "_size", "_symbols", "_libc")

    def __init__(self, address: int, size: int, symbols: dict[str, int], libc: _Libc) -> None:
        self._address, self._size, self._symbols, self._libc = address, size, symbols, libc

    def address(self, name: str) -> int:
        """Where the object's global symbol ``name`` is, or 0 when it defines none."""
        return self._symbols.get(name, 0)

    def __del__(self) -> None:
        if self._size:
            self._libc.munmap(self._address, self._size)
            self._size = 0


def _align(value: int, alignment: int) -> int:
    alignment = max(alignment, 1)
    return -(-value // alignment) * alignment


def load(obj: bytes, resolve: Callable[[str], int]) -> Image:
    """Map and link ``obj``; ``resolve(name)`` gives an undefined symbol's address (0: none).
    Raises :class:`Unsupported` (nothing mapped) or ``OSError`` (the mapping failed)."""
    import mmap

    parsed = _Object(obj)
    parsed.check()
    # Undefined symbols first: one that does not resolve refuses the object before any mapping.
    external: dict[str, int] = {}
    for symbol in parsed.symbols:
        if symbol.section == _SHN_UNDEF and symbol.bind != _STB_LOCAL and symbol.name and symbol.name not in external:
            address = resolve(symbol.name)
            if not address and symbol.bind != _STB_WEAK:
                raise Unsupported(f"symbol {symbol.name} is not available in this process")
            external[symbol.name] = address
    # Layout: code, constants, writable data (with the COMMON symbols), each group page-aligned.
    page = mmap.PAGESIZE
    size = 0
    groups: list[tuple[int, int, int]] = []  # (start, end, protection)
    commons: dict[int, int] = {}  # COMMON symbol's index: its offset in the image
    for wanted, protection in ((_SHF_EXECINSTR, _PROT_READ | _PROT_EXEC), (0, _PROT_READ), (_SHF_WRITE, _PROT_READ | _PROT_WRITE)):
        start = size = _align(size, page)
        for section in parsed.sections:
            if parsed.loaded(section) and section.flags & (_SHF_EXECINSTR | _SHF_WRITE) == wanted:
                section.place = size = _align(size, section.align)
                size += section.size
        if wanted == _SHF_WRITE:
            for index, symbol in enumerate(parsed.symbols):
                if symbol.section == _SHN_COMMON:
                    commons[index] = size = _align(size, symbol.value)
                    size += symbol.size
        groups.append((start, size, protection))
    total = max(_align(size, page), page)
    libc = _get_libc()
    ctypes = libc.ctypes
    mapped = libc.mmap(None, total, _PROT_READ | _PROT_WRITE, _MAP_PRIVATE | _MAP_ANONYMOUS, -1, 0)
    if mapped is None or mapped == ctypes.c_void_p(-1).value:
        raise OSError(ctypes.get_errno(), "mmap failed for a kernel's object code")
    base = int(mapped)
    image = bytearray(total)
    for section in parsed.sections:
        if section.place >= 0 and section.kind != _SHT_NOBITS:
            image[section.place : section.place + section.size] = obj[section.offset : section.offset + section.size]

    def address_of(index: int) -> int:
        symbol = parsed.symbols[index]
        if symbol.section == _SHN_UNDEF:
            return external.get(symbol.name, 0)
        if symbol.section == _SHN_ABS:
            return symbol.value
        if symbol.section == _SHN_COMMON:
            return base + commons[index]
        place = parsed.sections[symbol.section].place
        if place < 0:
            raise Unsupported(f"symbol {symbol.name!r} lives in a section that is not loaded")
        return base + place + symbol.value

    try:
        for target, entries in parsed.relocations:
            section = parsed.sections[target]
            if section.place < 0:
                continue
            for offset, kind, symbol_index, addend in entries:
                width, relative = _RELOCATIONS[kind]
                where = section.place + offset
                value = address_of(symbol_index) + addend - (base + where if relative else 0)
                if width == 8:
                    struct.pack_into("<Q", image, where, value & 0xFFFFFFFFFFFFFFFF)
                elif kind == _R_X86_64_32:
                    if not 0 <= value < 1 << 32:
                        raise Unsupported(f"relocation kind {kind} does not fit ({value:#x})")
                    struct.pack_into("<I", image, where, value)
                else:
                    if not -(1 << 31) <= value < 1 << 31:
                        raise Unsupported(f"relocation kind {kind} does not fit ({value:#x})")
                    struct.pack_into("<i", image, where, value)
        symbols = {
            symbol.name: address_of(index)
            for index, symbol in enumerate(parsed.symbols)
            if symbol.bind != _STB_LOCAL and symbol.section != _SHN_UNDEF and symbol.name
        }
        ctypes.memmove(base, (ctypes.c_char * total).from_buffer(image), total)
        for start, end, protection in groups:
            if end > start and libc.mprotect(base + start, _align(end, page) - start, protection) != 0:
                raise OSError(ctypes.get_errno(), "mprotect failed for a kernel's object code")
    except BaseException:
        libc.munmap(base, total)
        raise
    return Image(base, total, symbols, libc)
