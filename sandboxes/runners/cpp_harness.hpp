// Compiled INTO the program, included before the solution: calls one function with arguments read as JSON
// from stdin and writes the return value as tagged JSON (the format of py_harness.py), one line:
//
//     \x1ePROCTOR {"i":0,"values":[{"ok":<tagged>}]}     or   ... [{"err":"what()"}]
//
// The code scorer writes main.cpp as this header, `#line 1`, the solution, then
// `signed main() { return proctor::run(&solve); }` (or `&Solution::solve`). Each test is its own execution, so a crash loses that test only. Only the
// value leaves the sandbox: the expected value is compared outside it, never seen here.
#include <cctype>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <iterator>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

namespace proctor {

struct Json {
    enum Kind { Null, Bool, Int, Float, Str, Arr, Obj } kind = Null;
    bool b = false;
    long long i = 0;
    double d = 0;
    std::string s;
    std::vector<Json> a;
    std::vector<std::pair<std::string, Json>> o;
};

struct Parser {
    const std::string& t;
    size_t p = 0;
    void ws() { while (p < t.size() && std::isspace((unsigned char)t[p])) p++; }
    char peek() { ws(); return p < t.size() ? t[p] : '\0'; }
    void expect(char c) {
        if (peek() != c) throw std::runtime_error("bad JSON argument");
        p++;
    }
    std::string str() {
        expect('"');
        std::string out;
        while (p < t.size() && t[p] != '"') {
            char c = t[p++];
            if (c != '\\') { out += c; continue; }
            char e = t[p++];
            switch (e) {
                case 'n': out += '\n'; break;
                case 't': out += '\t'; break;
                case 'r': out += '\r'; break;
                case 'b': out += '\b'; break;
                case 'f': out += '\f'; break;
                case 'u': {
                    unsigned cp = std::stoul(t.substr(p, 4), nullptr, 16);
                    p += 4;
                    if (cp < 0x80) out += (char)cp;
                    else if (cp < 0x800) { out += (char)(0xC0 | (cp >> 6)); out += (char)(0x80 | (cp & 63)); }
                    else { out += (char)(0xE0 | (cp >> 12)); out += (char)(0x80 | ((cp >> 6) & 63)); out += (char)(0x80 | (cp & 63)); }
                    break;
                }
                default: out += e;
            }
        }
        expect('"');
        return out;
    }
    Json value() {
        Json v;
        char c = peek();
        if (c == '"') { v.kind = Json::Str; v.s = str(); }
        else if (c == '[') {
            v.kind = Json::Arr; p++;
            if (peek() == ']') { p++; return v; }
            for (;;) { v.a.push_back(value()); if (peek() == ',') { p++; continue; } expect(']'); break; }
        } else if (c == '{') {
            v.kind = Json::Obj; p++;
            if (peek() == '}') { p++; return v; }
            for (;;) {
                std::string k = str(); expect(':'); v.o.emplace_back(k, value());
                if (peek() == ',') { p++; continue; }
                expect('}'); break;
            }
        } else if (t.compare(p, 4, "true") == 0) { v.kind = Json::Bool; v.b = true; p += 4; }
        else if (t.compare(p, 5, "false") == 0) { v.kind = Json::Bool; p += 5; }
        else if (t.compare(p, 4, "null") == 0) { p += 4; }
        else {
            size_t start = p;
            while (p < t.size() && std::string("+-0123456789.eE").find(t[p]) != std::string::npos) p++;
            std::string num = t.substr(start, p - start);
            if (num.empty()) throw std::runtime_error("bad JSON argument");
            if (num.find_first_of(".eE") == std::string::npos) { v.kind = Json::Int; v.i = std::stoll(num); v.d = (double)v.i; }
            else { v.kind = Json::Float; v.d = std::stod(num); }
        }
        return v;
    }
};

template <class T> struct is_vector : std::false_type {};
template <class T, class A> struct is_vector<std::vector<T, A>> : std::true_type {};
template <class T> struct is_bool_vector : std::false_type {};
template <class A> struct is_bool_vector<std::vector<bool, A>> : std::true_type {};
template <class T> struct is_pair : std::false_type {};
template <class A, class B> struct is_pair<std::pair<A, B>> : std::true_type {};
template <class T> struct is_map : std::false_type {};
template <class K, class V, class C, class A> struct is_map<std::map<K, V, C, A>> : std::true_type {};
template <class K, class V, class H, class E, class A>
struct is_map<std::unordered_map<K, V, H, E, A>> : std::true_type {};
template <class T> struct is_set : std::false_type {};
template <class K, class C, class A> struct is_set<std::set<K, C, A>> : std::true_type {};
template <class K, class H, class E, class A>
struct is_set<std::unordered_set<K, H, E, A>> : std::true_type {};
template <class T> inline constexpr bool unsupported = false;

template <class T> T from(const Json& j) {
    if constexpr (std::is_same_v<T, bool>) {
        if (j.kind != Json::Bool) throw std::runtime_error("argument is not a boolean");
        return j.b;
    } else if constexpr (std::is_same_v<T, char>) {
        if (j.kind != Json::Str || j.s.size() != 1) throw std::runtime_error("argument is not a char");
        return j.s[0];
    } else if constexpr (std::is_integral_v<T>) {
        if (j.kind != Json::Int) throw std::runtime_error("argument is not an integer");
        return (T)j.i;
    } else if constexpr (std::is_floating_point_v<T>) {
        if (j.kind != Json::Int && j.kind != Json::Float) throw std::runtime_error("argument is not a number");
        return (T)j.d;
    } else if constexpr (std::is_same_v<T, std::string>) {
        if (j.kind != Json::Str) throw std::runtime_error("argument is not a string");
        return j.s;
    } else if constexpr (is_vector<T>::value) {
        if (j.kind != Json::Arr) throw std::runtime_error("argument is not a list");
        T out;
        for (const Json& x : j.a) out.push_back(from<typename T::value_type>(x));
        return out;
    } else if constexpr (is_pair<T>::value) {
        if (j.kind != Json::Arr || j.a.size() != 2) throw std::runtime_error("argument is not a pair");
        return T(from<typename T::first_type>(j.a[0]), from<typename T::second_type>(j.a[1]));
    } else {
        static_assert(unsupported<T>, "proctor: unsupported argument type");
    }
}

inline void quote(std::string& o, const std::string& s) {
    o += '"';
    for (unsigned char c : s) {
        if (c == '"') o += "\\\"";
        else if (c == '\\') o += "\\\\";
        else if (c < 0x20) { char buf[8]; std::snprintf(buf, sizeof buf, "\\u%04x", c); o += buf; }
        else o += (char)c;
    }
    o += '"';
}

template <class T> void emit(std::string& o, const T& v);

template <class It> void emit_items(std::string& o, It begin, It end) {
    o += '[';
    for (It it = begin; it != end; ++it) {
        if (it != begin) o += ',';
        emit(o, *it);
    }
    o += ']';
}

template <class T> void emit(std::string& o, const T& v) {
    if constexpr (std::is_same_v<T, bool>) {
        o += v ? "true" : "false";
    } else if constexpr (std::is_same_v<T, char>) {
        quote(o, std::string(1, v));
    } else if constexpr (std::is_integral_v<T>) {
        o += std::to_string(v);
    } else if constexpr (std::is_floating_point_v<T>) {
        if (std::isnan(v)) o += "{\"float\":\"nan\"}";
        else if (std::isinf(v)) o += v > 0 ? "{\"float\":\"inf\"}" : "{\"float\":\"-inf\"}";
        else { char buf[40]; std::snprintf(buf, sizeof buf, "%.17g", (double)v); o += buf; }
    } else if constexpr (std::is_same_v<T, std::string>) {
        quote(o, v);
    } else if constexpr (std::is_same_v<T, const char*> || std::is_same_v<T, char*>) {
        quote(o, std::string(v));
    } else if constexpr (is_bool_vector<T>::value) {
        o += '[';
        for (size_t k = 0; k < v.size(); k++) { if (k) o += ','; o += v[k] ? "true" : "false"; }
        o += ']';
    } else if constexpr (is_vector<T>::value) {
        emit_items(o, v.begin(), v.end());
    } else if constexpr (is_pair<T>::value) {
        o += "{\"tuple\":[";
        emit(o, v.first);
        o += ',';
        emit(o, v.second);
        o += "]}";
    } else if constexpr (is_map<T>::value) {
        o += "{\"dict\":[";
        bool first = true;
        for (const auto& kv : v) {
            if (!first) o += ',';
            first = false;
            o += '[';
            emit(o, kv.first);
            o += ',';
            emit(o, kv.second);
            o += ']';
        }
        o += "]}";
    } else if constexpr (is_set<T>::value) {
        o += "{\"set\":";
        emit_items(o, v.begin(), v.end());
        o += '}';
    } else {
        static_assert(unsupported<T>, "proctor: unsupported return type");
    }
}

template <class... A, size_t... I>
std::tuple<std::decay_t<A>...> arguments(const std::vector<Json>& args, std::index_sequence<I...>) {
    if (args.size() != sizeof...(A)) throw std::runtime_error("wrong number of arguments");
    return std::tuple<std::decay_t<A>...>(from<std::decay_t<A>>(args[I])...);
}

inline std::vector<Json> read_arguments() {
    std::string text((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
    Parser parser{text};
    Json args = parser.value();
    if (args.kind != Json::Arr) throw std::runtime_error("arguments are not a list");
    return args.a;
}

template <class Call> int report(Call call) {
    std::string line;
    try {
        std::string value = call();
        line = "{\"i\":0,\"values\":[{\"ok\":" + value + "}]}";
    } catch (const std::exception& e) {
        std::string what;
        quote(what, std::string("exception: ") + e.what());
        line = "{\"i\":0,\"values\":[{\"err\":" + what + "}]}";
    }
    std::cout.flush();
    std::cout << "\n\x1ePROCTOR " << line << "\n";
    std::cout.flush();
    return 0;
}

template <class R, class... A> int run(R (*f)(A...)) {
    static_assert(!std::is_void_v<R>, "proctor: the function must return its answer");
    return report([&] {
        auto args = arguments<A...>(read_arguments(), std::index_sequence_for<A...>{});
        std::string o;
        emit(o, std::decay_t<R>(std::apply(f, args)));
        return o;
    });
}

template <class C, class R, class... A> int run_member(C& obj, R (C::*f)(A...)) {
    static_assert(!std::is_void_v<R>, "proctor: the method must return its answer");
    return report([&] {
        auto args = arguments<A...>(read_arguments(), std::index_sequence_for<A...>{});
        std::string o;
        emit(o, std::decay_t<R>(std::apply([&](auto&... xs) -> R { return (obj.*f)(xs...); }, args)));
        return o;
    });
}

template <class C, class R, class... A> int run(R (C::*f)(A...)) {
    C obj;
    return run_member(obj, f);
}

template <class C, class R, class... A> int run(R (C::*f)(A...) const) {
    static_assert(!std::is_void_v<R>, "proctor: the method must return its answer");
    C obj;
    return report([&] {
        auto args = arguments<A...>(read_arguments(), std::index_sequence_for<A...>{});
        std::string o;
        emit(o, std::decay_t<R>(std::apply([&](auto&... xs) -> R { return (obj.*f)(xs...); }, args)));
        return o;
    });
}

}  // namespace proctor
